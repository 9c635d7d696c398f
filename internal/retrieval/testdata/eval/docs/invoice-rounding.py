"""Rounding rules for Ledgerline invoices.

The invoicer builds each monthly invoice from the charges recorded by
ledger-api. Charges are stored with six decimal places, because usage prices
such as 0.000125 EUR per API call need them, but an invoice can only show
amounts in the currency's minor unit. This module is the single place where
that rounding happens, so that the PDF, the totals sent to finance and the
amounts charged to customers' cards always agree.

Rules, agreed with the finance team in March 2025:

* Each invoice line is rounded on its own, then the rounded lines are summed.
  We never round the total separately, so the lines always add up to the
  total printed on the invoice.
* Rounding is half-even ("banker's rounding"): 2.345 becomes 2.34 and 2.355
  becomes 2.36. Over many invoices this does not drift in either direction.
* Tax is calculated per line on the rounded line amount, and rounded again
  with the same rule.
* Currencies round to their own number of decimals: two for EUR, USD and GBP,
  zero for JPY and KRW, three for KWD and BHD.
* If an invoice total is below the minimum of 0.50 in the invoice currency
  (50 in JPY and KRW), no invoice is issued that month and the amount is
  carried to the next month's invoice, shown there as a separate line named
  "carried from previous month".
"""

from decimal import Decimal, ROUND_HALF_EVEN

# Decimal places per ISO 4217 currency code. Anything missing uses 2.
MINOR_UNITS = {
    "EUR": 2,
    "USD": 2,
    "GBP": 2,
    "JPY": 0,
    "KRW": 0,
    "KWD": 3,
    "BHD": 3,
}

# Minimum invoice total per currency; below it the amount is carried forward.
MINIMUM_TOTAL = {
    "JPY": Decimal("50"),
    "KRW": Decimal("50"),
}
DEFAULT_MINIMUM = Decimal("0.50")


def round_amount(amount: Decimal, currency: str) -> Decimal:
    """Round one amount to the currency's minor unit, half-even.

    Raises ValueError for a float, because a float has already lost the
    precision this function exists to protect.
    """
    if isinstance(amount, float):
        raise ValueError("amounts must be Decimal, not float")
    places = MINOR_UNITS.get(currency, 2)
    quantum = Decimal(1).scaleb(-places)
    return amount.quantize(quantum, rounding=ROUND_HALF_EVEN)


def invoice_total(lines, currency: str, tax_rate: Decimal):
    """Return (net, tax, gross) for a list of unrounded line amounts.

    Each line is rounded first, tax is computed per rounded line and rounded
    again, and only then are the results summed: see the module docstring.
    """
    net = Decimal(0)
    tax = Decimal(0)
    for line in lines:
        rounded = round_amount(line, currency)
        net += rounded
        tax += round_amount(rounded * tax_rate, currency)
    return net, tax, net + tax


def should_carry_forward(gross: Decimal, currency: str) -> bool:
    """Report whether a total is too small to invoice this month."""
    minimum = MINIMUM_TOTAL.get(currency, DEFAULT_MINIMUM)
    return gross < minimum
