"""Example analytics task: convert supplier invoices to EUR and plot the
monthly totals.  It reads only /in (read-only), writes only the declared
outputs to /scratch, and reaches the network only through the egress proxy
(HTTPS_PROXY), which allows GET api.fx-rates.internal and adds the
credential itself: the code never sees a secret."""
import csv
import json
import os
import sys
import urllib.request
from collections import defaultdict

IN = "/in/supplier-2026-q3"
OUT = "/scratch"


def rows():
    path = IN if os.path.isfile(IN) else os.path.join(IN, "invoices.csv")
    with open(path, newline="") as f:
        yield from csv.DictReader(f)


def rates():
    with urllib.request.urlopen("https://api.fx-rates.internal/v1/latest?base=EUR",
                                timeout=20) as r:
        return json.load(r)["rates"]


def main():
    fx = rates()
    totals = defaultdict(float)
    for row in rows():
        month = row["date"][:7]
        totals[month] += float(row["amount"]) / float(fx.get(row["currency"], 1.0))
    with open(os.path.join(OUT, "eur_totals.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["month", "eur"])
        for month in sorted(totals):
            w.writerow([month, f"{totals[month]:.2f}"])
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        months = sorted(totals)
        plt.bar(months, [totals[m] for m in months])
        plt.ylabel("EUR")
        plt.savefig(os.path.join(OUT, "monthly.png"))
    except ImportError:
        print("matplotlib not in the image: no plot", file=sys.stderr)
    print(f"{len(totals)} months, {sum(totals.values()):.2f} EUR")


if __name__ == "__main__":
    main()
