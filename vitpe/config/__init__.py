"""Run configuration: nested dataclasses filled strictly from YAML and ``key=value`` dotted overrides.

Unknown keys and values of the wrong type are errors that name the key (and suggest close ones); nothing is
silently dropped. The resolved config is saved in every run folder and inside every checkpoint.

* :mod:`~vitpe.config.schema` -- the fields and their defaults;
* :mod:`~vitpe.config.strict` -- filling the dataclasses from a mapping, parsing overrides;
* :mod:`~vitpe.config.schedule` -- the sizes and epochs a run trains at, the sizes its model is built for;
* :mod:`~vitpe.config.validate` -- the value checks, the PE's name and options against the registry;
* :mod:`~vitpe.config.load` -- from a mapping or a file, back to a file, and the key of an experiment.
"""

from vitpe.config.load import config_from_dict, dump_config, given_keys, group_key, load_config, to_dict
from vitpe.config.schedule import (all_warmup_note, eval_size, fit_size_schedule, reference_grid_note,
                                   reference_length, reference_size, split_epochs)
from vitpe.config.schema import (COMPILE_MODES, WARMUP_START, Config, ConfigError, DataConfig, ModelConfig,
                                 TrainConfig, default_data_root)
from vitpe.config.strict import parse_override, typed_override
from vitpe.config.validate import (DATASETS, FOLDER_DATASETS, IMAGE_DATASETS, INIT_PREFIXES, PAD_MODES, TASKS,
                                   TEXT_DATASETS, check_pe, validate)

__all__ = [
    "COMPILE_MODES", "DATASETS", "FOLDER_DATASETS", "IMAGE_DATASETS", "INIT_PREFIXES", "PAD_MODES", "TASKS",
    "TEXT_DATASETS", "WARMUP_START", "Config", "ConfigError", "DataConfig", "ModelConfig", "TrainConfig",
    "all_warmup_note",
    "check_pe", "config_from_dict", "default_data_root", "dump_config", "eval_size", "fit_size_schedule",
    "given_keys", "group_key", "load_config", "parse_override", "reference_grid_note", "reference_length",
    "reference_size", "split_epochs", "to_dict", "typed_override", "validate",
]
