"""The results wing: a run's record (its schema in ``record``), the tables and
summary Python makes of it (``result.RunResult``), every metric formula
(``metrics``) and the results directory of sweeps (``store``). It knows
scenarios but not how runs are made.
"""
