"""Where arrays live, in one package (as scikit-learn's ``utils/_array_api.py`` and SciPy's ``_lib/_array_api.py``).

- :mod:`~mhattn.backend.arrays`: the inputs' namespace (:func:`array_namespace`, the one name for it), the backend
  for new arrays (:func:`set_backend`, :func:`use_backend`) and its device, and :func:`asarray`, the one function
  that moves an array into a library and onto a device;
- :mod:`~mhattn.backend.host`: NumPy on the host: which NumPy arrays mhattn takes, :func:`to_numpy`;
- :mod:`~mhattn.backend.extra`: what the array API standard lacks (scatter-add, picked entries, one-hot, uniform
  draws from a seeded generator), one helper each;
- :mod:`~mhattn.backend.argtypes`: the number arguments' and options' one check and phrasing.

Every name below is public; no module of mhattn imports a private name of another.
"""

from mhattn.backend.arrays import (
    BACKENDS,
    array_namespace,
    asarray,
    broadcast_shape,
    broadcasts_to,
    current_array_module,
    device_of,
    get_backend,
    get_device,
    is_array,
    is_ndarray_float,
    is_numpy,
    read_only,
    set_backend,
    use_backend,
)
from mhattn.backend.extra import one_hot, pick_last, scatter_add, uniform
from mhattn.backend.host import library_of, numpy_kind, plain, safe_to_share, to_numpy

__all__ = [
    "BACKENDS",
    "array_namespace",
    "asarray",
    "broadcast_shape",
    "broadcasts_to",
    "current_array_module",
    "device_of",
    "get_backend",
    "get_device",
    "is_array",
    "is_ndarray_float",
    "is_numpy",
    "library_of",
    "numpy_kind",
    "one_hot",
    "pick_last",
    "plain",
    "read_only",
    "safe_to_share",
    "scatter_add",
    "set_backend",
    "to_numpy",
    "uniform",
    "use_backend",
]
