"""Schemas of every forecaster's stored state: what the knowledge store and the model registry may hold.

A stored state is untrusted input (anyone who may edit the knowledge ConfigMap or write to the
registry's bucket wrote it), so it is plain data only (numbers, arrays, strings in JSON) and it is
validated field by field before a model is built from it. Nothing in a state is ever executed or
unpickled: a library model that cannot be written as parameters is stored as the parameters it is
rebuilt from. Every ``from_dict`` of ``models/forecast`` reads its state through :func:`read_state`,
which raises :class:`StateError` (a ``ValueError``) naming the first field that does not fit.

The bounds are what the models can run, not what the defaults are: a window of a million samples
is far beyond any setting, but bounds the memory a forged document can make the agent allocate.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, model_validator

MAX_SAMPLES = 1_000_000
"""Most samples any stored series may hold (a week of seconds is 604,800)."""
MAX_PARAMETERS = 64
"""Most coefficients a stored ARIMA may have (the order search stops at p, q <= 5 with seasonal terms)."""
MAX_ORDER = 10
"""Highest AR, MA or differencing order a stored ARIMA may declare."""

MAX_KALMAN_STATE = 2 * MAX_ORDER + 1
"""The largest state a stored statsforecast ARIMA may need (its ``r``): what orders of :data:`MAX_ORDER` without a
season give, as every fit of Perdix's is (``season_length=1``). The library's set-up of the state's covariance
grows with the fourth power of it: a seasonal order of 2 at a season of 100 (``r`` 201) took 1.8 GB and 4.7 s a
forecast, a 15-KB artifact whose checksums and schema were right."""

Int = Annotated[int, Strict()]
"""A JSON integer (not a float, a string or a boolean)."""
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
FiniteFloat = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A JSON number that is neither NaN nor infinite (``json.loads`` accepts ``NaN`` and ``Infinity``)."""
Series = Annotated[list[FiniteFloat], Field(max_length=MAX_SAMPLES)]
"""Samples without gaps."""
GappedSeries = Annotated[list[FiniteFloat | None], Field(max_length=MAX_SAMPLES)]
"""Samples where ``null`` marks a gap."""
Window = Annotated[Int, Field(ge=1, le=MAX_SAMPLES)]


class StateError(ValueError):
    """A stored model state that does not fit its schema; the message names the field."""


class _State(BaseModel):
    """Strict about shape: unknown fields are refused, numbers are not read from strings (the leaf types)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ArimaState(_State):
    """:class:`~models.forecast.arima.ArimaForecaster`: the order, the fitted parameters and the window."""

    name: Literal["arima"]
    window: Window | None
    max_p: Annotated[Int, Field(ge=0, le=MAX_ORDER)]
    max_q: Annotated[Int, Field(ge=0, le=MAX_ORDER)]
    max_d: Annotated[Int, Field(ge=0, le=2)]
    update_maxiter: Annotated[Int, Field(ge=0, le=10_000)]
    y: Series
    order: (
        tuple[
            Annotated[Int, Field(ge=0, le=MAX_ORDER)],
            Annotated[Int, Field(ge=0, le=2)],
            Annotated[Int, Field(ge=0, le=MAX_ORDER)],
        ]
        | None
    ) = None
    with_intercept: Bool | None = None
    params: Annotated[list[FiniteFloat], Field(max_length=MAX_PARAMETERS)] | None = None

    @model_validator(mode="after")
    def _fitted_whole(self) -> ArimaState:
        present = [self.order is not None, self.with_intercept is not None, self.params is not None]
        if any(present) and not all(present):
            raise ValueError("order, with_intercept and params come together (a fitted model) or not at all")
        return self


COEFFICIENT_NAME = r"^(?:(?:ar|ma|sar|sma)[1-9][0-9]?|intercept|drift)$"
"""The coefficient names statsforecast's ARIMA gives (no exogenous regressors but the drift)."""


class StatsForecastFit(_State):
    """What statsforecast's ``forward`` reads from a fitted AutoARIMA: order, coefficients, innovation variance.

    ``forward`` re-applies the coefficients (fixed, no search) to the newest window, so these are the
    whole model; the rest of the library's fitted dictionary (residuals, Kalman state) is rebuilt by it.
    """

    arma: tuple[Annotated[Int, Field(ge=0, le=MAX_ORDER * 100)], ...] = Field(min_length=7, max_length=7)
    """statsforecast's ``arma``: p, q, P, Q, season length, d, D."""
    coef: Annotated[
        list[tuple[Annotated[Str, Field(pattern=COEFFICIENT_NAME)], FiniteFloat]], Field(max_length=MAX_PARAMETERS)
    ]
    """Coefficients by name, in the library's order."""
    sigma2: Annotated[FiniteFloat, Field(ge=0)]
    x: Series
    """The series the model was fitted on (a drift term is re-estimated over its length)."""
    xreg: Annotated[list[tuple[FiniteFloat]], Field(max_length=MAX_SAMPLES)] | None = None
    """The drift regressor (one column), present exactly when a ``drift`` coefficient is."""

    @model_validator(mode="after")
    def _consistent(self) -> StatsForecastFit:
        names = [name for name, _ in self.coef]
        if len(set(names)) != len(names):
            raise ValueError("coefficient names repeat")
        p, q, big_p, big_q, season, d, big_d = self.arma
        if season < 1:
            raise ValueError("season length must be at least 1")
        if max(p, q, big_p, big_q, d, big_d) > MAX_ORDER:
            raise ValueError(f"ARIMA orders above {MAX_ORDER}")
        state = max(p + season * big_p, q + season * big_q + 1)
        if state > MAX_KALMAN_STATE:
            raise ValueError(
                f"a Kalman state of {state} values (p + season x P, q + season x Q + 1), over {MAX_KALMAN_STATE}: "
                "more than any ARIMA this Perdix fits"
            )
        if ("drift" in names) != (self.xreg is not None):
            raise ValueError("xreg (the drift regressor) comes with a 'drift' coefficient and only with it")
        if self.xreg is not None and len(self.xreg) != len(self.x):
            raise ValueError("xreg must have one row per fitted sample")
        return self


class StatsForecastState(_State):
    """:class:`~models.forecast.statsforecast_arima.StatsForecastArima`: the fitted parameters and the window."""

    name: Literal["statsforecast-arima"]
    window: Window | None
    max_d: Annotated[Int, Field(ge=0, le=2)]
    y: Series
    fitted: StatsForecastFit | None = None


class LinearState(_State):
    """:class:`~models.forecast.linear.LinearForecaster`: its options and the samples the line is fitted on."""

    name: Literal["linear"]
    window: Annotated[Int, Field(ge=2, le=MAX_SAMPLES)]
    min_samples: Annotated[Int, Field(ge=0, le=MAX_SAMPLES)]
    level_shifts: Bool = False
    smear_s: Annotated[Int, Field(ge=0, le=86_400)] = 0
    y: GappedSeries


class NaiveState(_State):
    """:class:`~models.forecast.seasonal.NaiveForecaster`: the last value."""

    last: FiniteFloat


class ResidualState(_State):
    """The residual model of a seasonal forecaster: its name and its own state (read by its own schema)."""

    name: Str
    state: dict[str, Any]


class SeasonalState(_State):
    """:class:`~models.forecast.seasonal.SeasonalForecaster`: the daily profile, its offset and clock, the residual."""

    kind: Literal["seasonal"]
    step_s: Annotated[Int, Field(ge=1, le=86_400)]
    profile_bin_s: Annotated[Int, Field(ge=1, le=86_400)]
    residual_window_s: Annotated[Int, Field(ge=1, le=30 * 86_400)]
    profile: Annotated[list[FiniteFloat], Field(max_length=86_400)]
    offset: FiniteFloat
    next_s: FiniteFloat
    residual: ResidualState


class ReloadedState(_State):
    """:class:`~models.forecast.reloaded.ReloadedForecaster`: a registry model, where it came from, the partial step."""

    name: Literal["registry"]
    job: Annotated[Str, Field(min_length=1, max_length=253)]
    version: Annotated[Str, Field(pattern=r"^v\d{8}T\d{9}Z(?:-[0-9a-z]+)?$")]
    backtest_wape: Annotated[FiniteFloat, Field(ge=0)]
    agent_step_s: Annotated[FiniteFloat, Field(gt=0, le=86_400)]
    buffer: Annotated[list[FiniteFloat | None], Field(max_length=86_400)]
    model: dict[str, Any]


StateT = TypeVar("StateT", bound=_State)


def read_state(schema: type[StateT], state: Any) -> StateT:
    """``state`` validated against ``schema``; raises :class:`StateError` naming the first misfit field."""
    if not isinstance(state, dict):
        raise StateError(f"{schema.__name__}: expected a JSON object, found {type(state).__name__}")
    try:
        return schema.model_validate(state)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(document)"
        raise StateError(f"{schema.__name__}: {where}: {first['msg']} ({exc.error_count()} problem(s))") from None
