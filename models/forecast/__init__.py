"""Workload forecasting: the Forecaster protocol, ARIMA (pmdarima, default), statsforecast AutoARIMA,
the linear fallback, WAPE, and the per-loop manager with background retraining."""

from models.forecast.arima import ArimaForecaster
from models.forecast.base import Forecaster
from models.forecast.config import DEFAULT_FORECASTER, ForecasterConfig
from models.forecast.linear import LinearForecaster
from models.forecast.manager import Forecast, WorkloadForecaster
from models.forecast.metrics import wape
from models.forecast.statsforecast_arima import StatsForecastArima

__all__ = [
    "ArimaForecaster",
    "DEFAULT_FORECASTER",
    "Forecast",
    "Forecaster",
    "ForecasterConfig",
    "LinearForecaster",
    "StatsForecastArima",
    "WorkloadForecaster",
    "wape",
]
