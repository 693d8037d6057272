"""Evaluation runner: routers x protocols x pools x folds -> metrics, decisions, report."""
