"""Token budgets per person per day (``ZETT_TOKEN_BUDGETS``): docs/operations.md, Budgets.

``ledger``: the ``TokenUsage`` rows and the decisions on them; ``admission``: the run
start check, the waits, and the extension that admits each model call.
"""

from agent_app.budgets.admission import BUDGETS, BudgetExtension, admit_run
from agent_app.budgets.ledger import Budget, BudgetExceeded, budget_of, check_budget, limit_for

__all__ = [
    "BUDGETS",
    "Budget",
    "BudgetExceeded",
    "BudgetExtension",
    "admit_run",
    "budget_of",
    "check_budget",
    "limit_for",
]
