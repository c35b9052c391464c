"""StreamBed offline capacity planning: Capacity Estimator, Configuration Optimizer, Resource Explorer.

Pure logic over a testbed protocol (``models.streambed.testbed``); the runner that drives it against
the simulator lives in ``lab.capacity_plan``. The result is a capacity model file whose capacities
per scale-out the agent uses as a prior (``load_capacity_prior``). The optimizer needs PuLP (the
``lab`` extra) and loads on first use of one of its names: the agent reads a prior without it.
"""

from typing import TYPE_CHECKING

from models.streambed.estimator import (
    CapacityEstimate,
    EstimationError,
    EstimatorSettings,
    Probe,
    estimate_capacity,
    is_sustainable,
)
from models.streambed.explorer import (
    FAMILIES,
    BudgetMeasurement,
    ExplorerSettings,
    FamilyScore,
    ResourceExplorer,
    Surrogate,
    SurrogateChoice,
    UnreachableRate,
    expected_improvement,
    extrapolation_rmse,
    fit_surrogate,
    loocv_rmse,
    select_surrogate,
    surrogate_cost,
)
from models.streambed.model_file import (
    SCHEMA_VERSION,
    CapacityModelError,
    CapacityModelFile,
    load_capacity_prior,
    read_capacity_model,
    write_capacity_model,
)

if TYPE_CHECKING:
    from models.streambed.optimizer import (
        Configuration,
        InfeasibleBudget,
        OperatorRate,
        bound_rate,
        optimize_configuration,
        rates_from_measurement,
    )

_OPTIMIZER_NAMES = frozenset(
    {
        "Configuration",
        "InfeasibleBudget",
        "OperatorRate",
        "bound_rate",
        "optimize_configuration",
        "rates_from_measurement",
    }
)


def __getattr__(name: str) -> object:
    """The optimizer's names, imported from ``models.streambed.optimizer`` (PuLP) when first asked for."""
    if name in _OPTIMIZER_NAMES:
        from models.streambed import optimizer

        return getattr(optimizer, name)
    raise AttributeError(f"module 'models.streambed' has no attribute {name!r}")


__all__ = [
    "FAMILIES",
    "SCHEMA_VERSION",
    "CapacityEstimate",
    "CapacityModelFile",
    "CapacityModelError",
    "Configuration",
    "EstimationError",
    "EstimatorSettings",
    "ExplorerSettings",
    "FamilyScore",
    "InfeasibleBudget",
    "BudgetMeasurement",
    "OperatorRate",
    "Probe",
    "ResourceExplorer",
    "Surrogate",
    "SurrogateChoice",
    "UnreachableRate",
    "bound_rate",
    "estimate_capacity",
    "expected_improvement",
    "extrapolation_rmse",
    "fit_surrogate",
    "is_sustainable",
    "load_capacity_prior",
    "loocv_rmse",
    "optimize_configuration",
    "rates_from_measurement",
    "read_capacity_model",
    "select_surrogate",
    "surrogate_cost",
    "write_capacity_model",
]
