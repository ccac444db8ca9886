# A model-written program: summarise a month of orders by region, the kind of
# loop-filter-aggregate a model would otherwise spend a dozen turns on.
import random
import statistics

random.seed(7)
regions = ("north", "south", "east", "west")
orders = [
    {"id": i, "region": random.choice(regions), "amount": round(random.lognormvariate(3.5, 0.6), 2)}
    for i in range(5_000)
]

by_region = {}
for order in orders:
    by_region.setdefault(order["region"], []).append(order["amount"])

summary = {
    region: {
        "orders": len(amounts),
        "total": round(sum(amounts), 2),
        "median": round(statistics.median(amounts), 2),
        "p95": round(sorted(amounts)[int(len(amounts) * 0.95)], 2),
    }
    for region, amounts in sorted(by_region.items())
}
best = max(summary, key=lambda r: summary[r]["total"])
print(f"{len(orders)} orders across {len(summary)} regions; best region: {best}")
return {"best_region": best, "regions": summary}
