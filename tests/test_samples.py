"""Sample loading from real files on disk: every format, the Model Zoo layout, and each refusal."""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from onnx_parity.models.samples.loading import GoldenCase, SampleError, SampleSet, load_samples


class WritesMarker:
    """A real malicious payload: unpickling it calls open(marker, "w"), creating the file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "samples").mkdir()
    return tmp_path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_pb(path: Path, array: np.ndarray, name: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(numpy_helper.from_array(array, name).SerializeToString())
    return path


def load_error(inputs: dict[str, Path] | Path, repo: Path) -> str:
    """The refusal as the report shows it: the message (what, where), then its one fix."""
    with pytest.raises(SampleError) as caught:
        load_samples(inputs, repo)
    message, fix = str(caught.value), caught.value.fix
    assert "Fix:" not in message
    assert fix
    return f"{message} Fix: {fix}"


# --- formats ------------------------------------------------------------------------------

def test_npy_table_entry_keeps_values_dtype_and_hash(repo: Path) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    ids = np.array([[101, 2023, 102]], dtype=np.int64)
    mask = np.array([[True, True, False]])
    paths = {name: repo / "samples" / f"{name}.npy" for name in ("x", "ids", "mask")}
    for name, array in zip(paths, (x, ids, mask), strict=True):
        np.save(paths[name], array)
    samples = load_samples(paths, repo)
    assert list(samples.named) == ["x", "ids", "mask"]
    np.testing.assert_array_equal(samples.named["x"], x)
    assert samples.named["ids"].dtype == np.int64
    assert samples.named["mask"].dtype == np.bool_
    assert [a.dtype for a in samples.positional] == [np.float32, np.int64, np.bool_]
    assert samples.files == {f"samples/{n}.npy": sha256(p) for n, p in paths.items()}
    assert samples.golden == ()
    assert samples.notes == ()


def test_npz_bundle_gives_every_array_in_file_order(repo: Path) -> None:
    path = repo / "samples" / "bundle.npz"
    np.savez(path, input_ids=np.ones((2, 5), np.int32), attention_mask=np.zeros((2, 5), bool))
    samples = load_samples(path, repo)
    assert list(samples.named) == ["input_ids", "attention_mask"]
    assert samples.named["input_ids"].dtype == np.int32
    assert [a.shape for a in samples.positional] == [(2, 5), (2, 5)]
    assert samples.files == {"samples/bundle.npz": sha256(path)}


def test_npz_table_entry_takes_its_key_or_the_only_array(repo: Path) -> None:
    both = repo / "samples" / "both.npz"
    single = repo / "samples" / "single.npz"
    np.savez(both, x=np.full((2, 2), 3.0), y=np.full((2, 2), 4.0))
    np.savez(single, anything=np.full((1, 3), 5.0))
    samples = load_samples({"y": both, "z": single}, repo)
    assert samples.named["y"][0, 0] == 4.0
    assert samples.named["z"].shape == (1, 3)


def test_npz_table_entry_without_its_key_names_what_it_holds(repo: Path) -> None:
    path = repo / "samples" / "both.npz"
    np.savez(path, x=np.ones((2, 2)), y=np.ones((2, 2)))
    message = load_error({"mask": path}, repo)
    assert "samples/both.npz" in message
    assert "`inputs.mask`" in message
    assert "x, y" in message
    assert "Fix:" in message


def test_pt_tensor_and_dict_of_tensors(repo: Path) -> None:
    single = repo / "samples" / "x.pt"
    bundle = repo / "samples" / "bundle.pt"
    torch.save(torch.linspace(0, 1, 6).reshape(2, 3), single)
    torch.save({"x": torch.ones(2, 3), "ids": torch.arange(6).reshape(2, 3)}, bundle)
    table = load_samples({"x": single}, repo)
    np.testing.assert_allclose(table.named["x"][1], [0.6, 0.8, 1.0], rtol=1e-6)
    loaded = load_samples(bundle, repo)
    assert list(loaded.named) == ["x", "ids"]
    assert loaded.named["ids"].dtype == np.int64
    assert isinstance(loaded.named["x"], np.ndarray)


def test_pb_tensor_proto_named_after_its_proto_name(repo: Path) -> None:
    path = write_pb(repo / "samples" / "pixels.pb", np.ones((2, 3, 4, 4), np.float16), "image")
    samples = load_samples(path, repo)
    assert list(samples.named) == ["image"]
    assert samples.named["image"].dtype == np.float16
    unnamed = write_pb(repo / "samples" / "pixels2.pb", np.ones((1, 2), np.float32))
    assert list(load_samples(unnamed, repo).named) == ["pixels2"]


def test_nan_and_inf_in_float_samples_are_a_note(repo: Path) -> None:
    x = np.array([[np.nan, 1.0, np.nan], [np.inf, -np.inf, np.nan]], np.float32)
    np.save(repo / "samples" / "x.npy", x)
    samples = load_samples({"x": repo / "samples" / "x.npy"}, repo)
    assert samples.notes == ("samples/x.npy holds 3 NaN and 2 Inf values; they are compared "
                             "position by position",)
    assert np.isnan(samples.named["x"]).sum() == 3


# --- Model Zoo layout ------------------------------------------------------------------------

def make_zoo(folder: Path, datasets: dict[int, list[np.ndarray]], outputs: bool = True) -> None:
    for number, arrays in datasets.items():
        case = folder / f"test_data_set_{number}"
        for k, array in enumerate(arrays):
            write_pb(case / f"input_{k}.pb", array, f"in{k}")
            if outputs:
                write_pb(case / f"output_{k}.pb", array * 2, f"out{k}")


def test_zoo_datasets_sorted_numerically_and_concatenated(repo: Path) -> None:
    folder = repo / "zoo"
    # 0, 2, 10: a lexical sort would give 0, 10, 2.
    make_zoo(folder, {n: [np.full((1, 3), n, np.float32), np.full((1,), n, np.int64)]
                      for n in (10, 0, 2)})
    samples = load_samples(folder, repo)
    assert [case.dataset for case in samples.golden] == [
        "test_data_set_0", "test_data_set_2", "test_data_set_10"]
    assert list(samples.named) == ["in0", "in1"]
    np.testing.assert_array_equal(samples.positional[0][:, 0], [0, 2, 10])
    np.testing.assert_array_equal(samples.positional[1], [0, 2, 10])
    assert samples.golden[2].outputs[0][0, 0] == 20.0
    assert len(samples.files) == 12  # 3 datasets x (2 inputs + 2 outputs)
    assert samples.files["zoo/test_data_set_2/output_1.pb"] == sha256(
        folder / "test_data_set_2" / "output_1.pb")


def test_zoo_inputs_sorted_numerically_and_outputs_optional(repo: Path) -> None:
    folder = repo / "zoo"
    make_zoo(folder, {0: [np.full((1,), k, np.float32) for k in range(12)]}, outputs=False)
    samples = load_samples(folder, repo)
    assert [float(a[0]) for a in samples.positional] == [float(k) for k in range(12)]
    assert samples.golden == (GoldenCase("test_data_set_0", samples.golden[0].inputs, ()),)


def test_zoo_with_unequal_shapes_uses_first_dataset_and_says_so(repo: Path) -> None:
    folder = repo / "zoo"
    make_zoo(folder, {0: [np.ones((1, 3), np.float32)], 1: [np.ones((1, 5), np.float32)]})
    samples = load_samples(folder, repo)
    assert samples.positional[0].shape == (1, 3)
    assert len(samples.golden) == 2
    assert "only test_data_set_0" in samples.notes[0]


def test_zoo_gap_in_input_numbers_is_refused(repo: Path) -> None:
    case = repo / "zoo" / "test_data_set_0"
    write_pb(case / "input_0.pb", np.ones((1, 2), np.float32))
    write_pb(case / "input_2.pb", np.ones((1, 2), np.float32))
    assert "[0, 2]" in load_error(repo / "zoo", repo)


def test_zoo_folder_as_table_entry_is_refused(repo: Path) -> None:
    make_zoo(repo / "zoo", {0: [np.ones((1, 2), np.float32)]})
    assert "must be the whole `inputs` value" in load_error({"x": repo / "zoo"}, repo)


# --- refusals: unsafe files ------------------------------------------------------------------

def test_malicious_payload_is_real(tmp_path: Path) -> None:
    # Control: the payload below does create its marker when unpickled the unsafe way.
    marker = tmp_path / "control-marker"
    pickle.loads(pickle.dumps(WritesMarker(marker)))
    assert marker.exists()


@pytest.mark.parametrize("save", ["torch.save", "raw pickle"])
def test_pt_pickle_that_would_run_code_is_refused(repo: Path, save: str) -> None:
    marker = repo / "pwned"
    path = repo / "samples" / "evil.pt"
    if save == "torch.save":
        torch.save({"x": torch.ones(2), "evil": WritesMarker(marker)}, path)
    else:
        path.write_bytes(pickle.dumps(WritesMarker(marker), protocol=2))
    message = load_error({"x": path}, repo)
    assert "samples/evil.pt" in message
    assert "would execute code" in message
    assert not marker.exists()


def test_npy_of_objects_is_refused_without_running_them(repo: Path) -> None:
    marker = repo / "pwned"
    path = repo / "samples" / "evil.npy"
    payload = np.empty((2,), dtype=object)
    payload[0], payload[1] = WritesMarker(marker), 1.0
    np.save(path, payload, allow_pickle=True)
    message = load_error({"x": path}, repo)
    assert "dtype object" in message
    assert "would execute code" in message
    assert not marker.exists()


def test_npz_of_objects_is_refused(repo: Path) -> None:
    marker = repo / "pwned"
    path = repo / "samples" / "evil.npz"
    np.savez(path, x=np.array([WritesMarker(marker)], dtype=object))
    assert "would execute code" in load_error(path, repo)
    assert not marker.exists()


def test_pb_with_external_data_is_never_followed(repo: Path) -> None:
    proto = numpy_helper.from_array(np.ones((1, 4), np.float32), "x")
    proto.ClearField("raw_data")
    proto.data_location = onnx.TensorProto.EXTERNAL
    entry = proto.external_data.add()
    entry.key, entry.value = "location", "../../etc/passwd"
    path = repo / "samples" / "x.pb"
    path.write_bytes(proto.SerializeToString())
    assert "external file" in load_error(path, repo)


def test_symlink_leaving_the_repo_is_refused(repo: Path, tmp_path_factory: pytest.TempPathFactory
                                            ) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.npy"
    np.save(outside, np.ones((1, 2)))
    link = repo / "samples" / "link.npy"
    link.symlink_to(outside)
    assert "outside the repository" in load_error({"x": link}, repo)


def test_bfloat16_tensor_is_accepted_bit_for_bit(repo: Path) -> None:
    """numpy has no bfloat16: the sample is held as ml_dtypes' and goes back to torch unchanged."""
    from onnx_parity.models.dtypes import BFLOAT16, to_tensor

    path = repo / "samples" / "x.pt"
    tensor = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    torch.save(tensor, path)
    array = load_samples({"x": path}, repo).named["x"]
    assert array.dtype == BFLOAT16
    assert torch.equal(to_tensor(array), tensor)
    assert np.array_equal(array.astype(np.float32), tensor.float().numpy())


# --- refusals: broken files ------------------------------------------------------------------

def test_missing_file_names_path_and_key(repo: Path) -> None:
    message = load_error({"x": repo / "samples" / "nope.npy"}, repo)
    assert message.startswith("Sample file samples/nope.npy (config key `inputs.x`) does not "
                              "exist. Fix:")


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".pt", ".pb"])
def test_empty_file_is_refused(repo: Path, suffix: str) -> None:
    path = repo / "samples" / f"x{suffix}"
    path.write_bytes(b"")
    assert "is empty (0 bytes)" in load_error({"x": path}, repo)


def write_real(path: Path) -> None:
    array = np.arange(4000, dtype=np.float32).reshape(40, 100)
    if path.suffix == ".npy":
        np.save(path, array)
    elif path.suffix == ".npz":
        np.savez(path, x=array)
    elif path.suffix == ".pt":
        torch.save(torch.from_numpy(array), path)
    else:
        write_pb(path, array)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".pt", ".pb"])
def test_file_cut_in_half_is_refused_as_unreadable(repo: Path, suffix: str) -> None:
    path = repo / "samples" / f"x{suffix}"
    write_real(path)
    assert load_samples({"x": path}, repo).named["x"].shape == (40, 100)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    message = load_error({"x": path}, repo)
    assert "could not be read as" in message
    assert "samples/x" in message


@pytest.mark.parametrize(("array", "expected"), [
    (np.zeros((0, 3), np.float32), "zero samples"),
    (np.float32(2.5), "no sample axis"),
])
def test_arrays_without_samples_are_refused(repo: Path, array: np.ndarray, expected: str
                                            ) -> None:
    path = repo / "samples" / "x.npy"
    np.save(path, array)
    assert expected in load_error({"x": path}, repo)


def test_unknown_suffix_lists_the_formats(repo: Path) -> None:
    path = repo / "samples" / "x.csv"
    path.write_text("1,2\n")
    assert ".npy" in load_error({"x": path}, repo)
    assert ".npz" in load_error({"x": path}, repo)


def test_string_array_is_refused(repo: Path) -> None:
    path = repo / "samples" / "x.npy"
    np.save(path, np.array(["a", "b"]))
    assert "dtype <U1" in load_error({"x": path}, repo)


def test_importing_samples_does_not_import_torch() -> None:
    # The CLI must start fast: torch is imported only when a .pt file is read.
    code = ("import sys, onnx_parity.models.samples.loading, onnx_parity.verification.compare, "
            "onnx_parity.models.batches; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.stdout.strip() == "False"


def test_sample_set_is_frozen(repo: Path) -> None:
    np.save(repo / "samples" / "x.npy", np.ones((1, 2)))
    samples = load_samples({"x": repo / "samples" / "x.npy"}, repo)
    assert isinstance(samples, SampleSet)
    with pytest.raises(AttributeError):
        setattr(samples, "notes", ("changed",))  # noqa: B010 (a frozen field, on purpose)
