package sandbox

// ReasonBudget is Report.Reason for a run a budget ended (Report.Budget
// names it). The budgets are counted by harness.Spend: a Run's, or a
// Session's across its commands.
const ReasonBudget = "budget"
