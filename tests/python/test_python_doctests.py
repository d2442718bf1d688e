"""The examples in the Python package's docstrings run and print what they say."""
import doctest
import importlib

import pytest

MODULES = ["addnorm", "addnorm._norms", "addnorm._batch_norm", "addnorm._residual",
           "addnorm._torch_patch"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0


def test_help_shows_the_signature_and_an_example():
    import addnorm
    text = addnorm.layer_norm.__doc__
    assert "torch.nn.functional.layer_norm" in text and ">>> " in text
    assert "C-contiguous" in addnorm.__doc__
