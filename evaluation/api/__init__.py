"""Evaluation's REST API, one module per concern (config/api_urls.py routes to each)."""
