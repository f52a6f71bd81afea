"""The shop's own data: orders of customers."""

from django.conf import settings
from django.db import models


class Order(models.Model):
    number = models.PositiveIntegerField(unique=True)
    customer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="orders"
    )
    item = models.CharField(max_length=100)
    total_cents = models.PositiveIntegerField()
    #: How many times the order was refunded: the at-most-once guarantee keeps it at 0 or 1.
    refunds = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"Order {self.number}"
