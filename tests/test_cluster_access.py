"""No one else gets in (kmbench/protocol/cluster.py): the clusters kmbench starts listen on
127.0.0.1 only; a scheduler is reached plainly only on this machine, and over the network only
by TLS with Dask's own configured certificates, which the scheduler checks."""

import pytest
from typer.testing import CliRunner

distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
import psutil  # noqa: E402  (a dependency of distributed)

from impls.distributed.dask_lloyd import DaskLloyd  # noqa: E402
from kmbench.cli import app  # noqa: E402
from kmbench.errors import ImplementationError, UsageError  # noqa: E402
from kmbench.protocol import Options  # noqa: E402
from kmbench.protocol.cluster import check_address, connect, local_only  # noqa: E402


def listening() -> set:
    """(address, port) of every socket this process and its children listen on."""
    processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
    return {(c.laddr.ip, c.laddr.port) for p in processes for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def test_the_dask_rows_own_cluster_listens_on_loopback_only():
    before = listening()
    cluster, client = DaskLloyd()._start_cluster(Options())
    try:
        opened = listening() - before
    finally:
        client.close()
        cluster.close()
    assert opened and {ip for ip, _ in opened} == {"127.0.0.1"}  # Dask's defaults open 0.0.0.0 and ::


def test_a_cluster_of_worker_processes_kmbench_starts_listens_on_loopback_only():
    """What the GPU rows hand LocalCUDACluster, on a LocalCluster of processes (its base)."""
    before = listening()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, **local_only()) as cluster:
        opened = listening() - before
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    assert len(opened) >= 4 and {ip for ip, _ in opened} == {"127.0.0.1"}  # scheduler, nanny, worker, HTTP


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "127.0.0.1:8786", "tcp://localhost:1", "tcp://[::1]:9",
                                     "inproc://192.0.2.2/1/2"])
def test_this_machine_is_reached_plainly(address):
    assert check_address(address, "--scheduler") == address


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "10.0.0.5:8786", "tcp://gpu-host:8786", "tcp://0.0.0.0:1"])
def test_the_network_is_refused_without_tls(address):
    with pytest.raises(UsageError, match=r"is on the network, where kmbench reaches a scheduler only by TLS"):
        check_address(address, "--scheduler")


def test_another_protocol_is_refused():
    with pytest.raises(UsageError, match=r"by tcp:// on this machine or by tls://; got ucx://"):
        check_address("ucx://10.0.0.5:8786", "--scheduler")


def test_the_command_line_refuses_a_plain_network_scheduler_before_anything_runs(tmp_path):
    store = tmp_path / "r.jsonl"
    ran = CliRunner().invoke(app, ["run", "--n", "200", "--impl", "numpy", "--store", str(store),
                                   "--scheduler", "tcp://10.0.0.5:8786"])
    assert ran.exit_code == 2 and "Traceback" not in ran.output
    assert " ".join(ran.output.split()).startswith("Error: --scheduler tcp://10.0.0.5:8786 is on the network")
    assert not store.exists()


def _certificates(folder, security) -> dict:
    """A Security's PEM texts written as the files Dask's configuration names."""
    folder.mkdir()
    files = {}
    for key, text in (("ca-file", security.tls_ca_file), ("client.cert", security.tls_client_cert),
                      ("client.key", security.tls_client_key)):
        path = folder / f"{key}.pem"
        path.write_text(text)
        files[f"distributed.comm.tls.{key}"] = str(path)
    return files


def test_over_tls_only_the_configured_certificates_get_in(tmp_path):
    pytest.importorskip("cryptography")  # Security.temporary makes the certificates
    from distributed.security import Security

    ours, theirs = Security.temporary(), Security.temporary()
    mine, stranger = _certificates(tmp_path / "ours", ours), _certificates(tmp_path / "theirs", theirs)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://",
                                  security=ours, **local_only(True)) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        with dask.config.set({"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None}):
            with pytest.raises(UsageError, match="Dask's configuration names no distributed.comm.tls.ca-file"):
                check_address(address, "--scheduler")
        with dask.config.set(mine):
            assert check_address(address, "--scheduler") == address
            client = connect(address)
            assert len(client.scheduler_info()["workers"]) == 1
            client.close()
        # A client that trusts the scheduler but holds a certificate another CA signed.
        with dask.config.set({**stranger, "distributed.comm.tls.ca-file": mine["distributed.comm.tls.ca-file"]}):
            with pytest.raises(ImplementationError, match="cannot reach the Dask scheduler"):
                connect(address)


def test_the_dask_rows_cluster_from_the_environment_is_checked_alike(tmp_path, monkeypatch):
    monkeypatch.setenv("KMBENCH_DASK_SCHEDULER", "tcp://10.0.0.5:8786")
    monkeypatch.setenv("KMBENCH_DATA", str(tmp_path / "datasets"))
    ran = CliRunner().invoke(app, ["run", "--n", "200", "--impl", "numpy", "--store", str(tmp_path / "r.jsonl")])
    assert ran.exit_code == 2
    assert " ".join(ran.output.split()).startswith("Error: $KMBENCH_DASK_SCHEDULER tcp://10.0.0.5:8786 is on the network")
    assert not (tmp_path / "datasets").exists() and not (tmp_path / "r.jsonl").exists()  # before anything is made


def test_a_scheduler_for_a_reproduction_that_runs_nothing_is_a_mistake_to_say():
    ran = CliRunner().invoke(app, ["reproduce", "radial-tree", "--no-run", "--scheduler", "tcp://127.0.0.1:8786"])
    assert ran.exit_code == 2
    assert " ".join(ran.output.split()) == ("Error: --scheduler measures cells and --no-run measures none: drop one "
                                            "of them.")
