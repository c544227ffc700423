"""Example analytics task: convert supplier invoices to EUR and plot the
monthly totals.  It reads only /in (read-only), writes only the declared
outputs to /scratch, and reaches the network only through the egress proxy
(HTTPS_PROXY), which allows GET api.fx-rates.internal and adds the
credential itself: the code never sees a secret.  Until the egress daemon
exists the sandbox has no route out at all, so the FX call fails and the
task says so and uses the built-in rates."""
import csv
import json
import os
import sys
import urllib.request
from collections import defaultdict

INPUTS = ["/in/supplier-2026-q3.csv", "/in/supplier-2026-q3"]
OUT = "/scratch"
FX_URL = "https://api.fx-rates.internal/v1/latest?base=EUR"
# EUR per unit of each currency, fixed for 2026-Q3 (the fallback).
BUILTIN = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}


def rows():
    path = next((p for p in INPUTS if os.path.isfile(p)), None)
    if path is None:
        sys.exit("no input: none of " + ", ".join(INPUTS))
    with open(path, newline="") as f:
        yield from csv.DictReader(f)


def rates():
    """EUR per unit: from the FX API through the proxy, else built in."""
    try:
        with urllib.request.urlopen(FX_URL, timeout=5) as r:
            per_eur = json.load(r)["rates"]   # units of X per 1 EUR
        fx = {c: 1.0 / float(v) for c, v in per_eur.items() if float(v) > 0}
        fx["EUR"] = 1.0
        print("rates: live from api.fx-rates.internal")
        return fx
    except Exception as e:          # no route, 403 from egress, bad JSON
        print(f"rates: built-in 2026-Q3 rates (FX API unavailable: "
              f"{type(e).__name__})")
        return dict(BUILTIN)


def main():
    fx = rates()
    totals = defaultdict(float)
    n = 0
    for row in rows():
        cur = row["currency"].strip().upper()
        if cur not in fx:
            sys.exit(f"no rate for currency {cur!r}")
        totals[row["date"][:7]] += float(row["amount"]) * fx[cur]
        n += 1
    months = sorted(totals)
    with open(os.path.join(OUT, "eur_totals.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["month", "eur"])
        for m in months:
            w.writerow([m, f"{totals[m]:.2f}"])
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(months, [totals[m] for m in months])
        ax.set_ylabel("EUR")
        ax.set_title("Supplier spend by month, 2026-Q3")
        fig.tight_layout()
        fig.savefig(os.path.join(OUT, "monthly.png"))
        plot = "monthly.png"
    except ImportError:
        plot = "no plot (matplotlib not in the image)"
    print(f"{n} invoices, {len(months)} months, "
          f"{sum(totals.values()):.2f} EUR total")
    for m in months:
        print(f"  {m}: {totals[m]:12.2f} EUR")
    print(f"wrote eur_totals.csv and {plot}")


if __name__ == "__main__":
    main()
