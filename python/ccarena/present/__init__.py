"""The presentation wing: number formatting shared by the CLI and the report,
figures (matplotlib) and the static HTML report, all drawn from stored results.
"""
