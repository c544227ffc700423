# tests/k8s: the code a rendered pod runs.
print("hello from a rendered pod")
