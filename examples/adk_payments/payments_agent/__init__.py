"""A billing agent on Google ADK: it charges an invoice through the payment provider's API and
emails the receipt."""
