# The sealed replay's attribute setter (issue 33): run inside the sandbox before the recorder's and the replayer's
# source, it registers itself as a module of its own name, so that a pickle the recorder writes can name its setter
# and the replayer's unpickling find it (a program's own functions live in __main__, which the recorder refuses).
# Standard library only.

import sys, types

ATTRIBUTES_MODULE = "rcb_sealed_attributes"  # what the recorded pickles name; no task's module


def attributes_set(obj, state):
    """A recorded object's attributes set as the reference's object had them, its class's __setstate__ never run
    (pickle's state setter: torch's Optimizer.__setstate__ adds a default the recorded optimizer did not hold)."""
    vars(obj).update(state)


def attributes_module_register():
    module = types.ModuleType(ATTRIBUTES_MODULE)
    attributes_set.__module__ = ATTRIBUTES_MODULE
    module.attributes_set = attributes_set  # type: ignore[attr-defined]  # the function pickle finds by name
    sys.modules[ATTRIBUTES_MODULE] = module


attributes_module_register()
