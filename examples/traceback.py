# A model-written program with a bug: the traceback comes back as data, with
# this program's own line numbers, so the model can fix the line.
prices = {"A": 12.5, "B": 7.25, "C": 3.0}
basket = [("A", 2), ("B", 1), ("D", 4)]


def line_total(sku, quantity):
    return prices[sku] * quantity


total = 0.0
for sku, quantity in basket:
    total += line_total(sku, quantity)
    print(f"after {sku}: {total:.2f}")
total
