"""An order flow on CrewAI Flows: it creates an order, charges the customer through the payment
provider's API and emails a confirmation a model writes."""
