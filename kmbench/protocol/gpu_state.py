"""What the GPUs a cell ran on were doing around its counted runs, as the driver tells it (NVML,
through nvidia-ml-py's `pynvml`): the SM and memory clocks, power, temperature and the
clocks-event (throttle) reasons just before and just after the counted runs, and the processes
holding each GPU. A GPU slows its clocks for a power cap, for heat or for a hardware slowdown, and
another program's kernels share its SMs and memory; a time measured so is not the GPU's, and
nothing in the time itself says it (nvbench records and flags both). So a cell is flagged
`throttled` where a GPU gave a reason other than idling or applications clocks someone set, and
`shared` where a process other than this run's (this process, its parents and its children:
the Dask workers a row starts) held the GPU.

Which GPUs a cell used is the row's declaration (Implementation.on_gpus): "one", the current CUDA
device (found by its PCI bus ID, so a Dask worker's CUDA_VISIBLE_DEVICES is followed); "several",
the GPUs of Problem.options.gpus, else every GPU visible. Without pynvml or a working driver
the record says why nothing was recorded; nothing here may cost a cell (every read is guarded).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kmbench.data.records import GPU_FLAGS

THROTTLED, SHARED = GPU_FLAGS  # the record's keys, which the tables read (Record.gpu_flags)
# The clocks-event reason bits of nvml.h (nvmlClocksEventReason*, once nvmlClocksThrottleReason*).
REASONS = {0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap", 0x8: "HW slowdown",
           0x10: "sync boost", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
           0x80: "HW power brake slowdown", 0x100: "display clock setting", 0x200: "board limit",
           0x400: "reliability"}
# Idle clocks and clocks set on purpose are no slowdown of work in progress.
HARMLESS = {"GPU idle", "applications clocks setting"}
INSTALL_HINT = "nvidia-ml-py is not installed (pip install 'kmbench[cuda12]' or 'kmbench[cuda13]')"


def _read(call, *args):
    """One NVML read, None where the GPU or driver does not support it (NVMLError) or anything fails."""
    try:
        return call(*args)
    except Exception:
        return None


def reason_names(mask: int | None) -> list[str] | None:
    if mask is None:
        return None
    return [name for bit, name in REASONS.items() if mask & bit] + (
        [f"unknown reason 0x{mask & ~sum(REASONS):x}"] if mask & ~sum(REASONS) else [])


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _processes(nvml, handle) -> list[dict] | None:
    """The processes holding a context on the GPU (compute and graphics), with the memory each holds."""
    found: dict[int, dict] = {}
    listed = False
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        call = getattr(nvml, name, None)
        entries = _read(call, handle) if call else None
        if entries is None:
            continue
        listed = True
        for entry in entries:
            pid = int(entry.pid)
            memory = getattr(entry, "usedGpuMemory", None)
            found.setdefault(pid, {"pid": pid, "memory_bytes": int(memory) if memory is not None else None})
    return list(found.values()) if listed else None


def sample(nvml, handle) -> dict:
    """One look at a GPU: clocks (MHz), power (W), temperature (C), the clocks-event reasons, processes."""
    reasons = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
               or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    power = _read(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
    limit = _read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    return {
        "sm_clock_mhz": _read(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1)),
        "memory_clock_mhz": _read(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_MEM", 2)),
        "power_w": power / 1000 if power is not None else None,
        "power_limit_w": limit / 1000 if limit is not None else None,
        "temperature_c": _read(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
        "clocks_event_reasons": reason_names(_read(reasons, handle)) if reasons else None,
        "processes": _processes(nvml, handle),
    }


def _cuda_bus_ids(ordinals: list[int] | None) -> list[str] | None:
    """The PCI bus IDs of CUDA devices by this process's numbers (`ordinals`; None: the current
    device; []: every visible one), through CuPy or PyTorch where one is already loaded; None
    where neither can say."""
    cupy, torch = sys.modules.get("cupy"), sys.modules.get("torch")
    try:
        if cupy is not None:
            count = cupy.cuda.runtime.getDeviceCount()
            chosen = [cupy.cuda.runtime.getDevice()] if ordinals is None else ordinals or list(range(count))
            return [cupy.cuda.Device(index).pci_bus_id for index in chosen if index < count]
        if torch is not None and torch.cuda.is_initialized():
            count = torch.cuda.device_count()
            chosen = [torch.cuda.current_device()] if ordinals is None else ordinals or list(range(count))
            ids = []
            for index in chosen:
                props = torch.cuda.get_device_properties(index)
                ids.append(f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0")
            return ids
    except Exception:
        return None
    return None


def _visible_indices(nvml) -> list[int]:
    """NVML's numbers of the GPUs CUDA_VISIBLE_DEVICES leaves visible (every one where it is unset;
    NVML itself ignores the variable), where it names them by number or UUID."""
    count = _read(nvml.nvmlDeviceGetCount) or 0
    every = list(range(count))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return every
    chosen = []
    for part in (part.strip() for part in visible.split(",") if part.strip()):
        if part.isdigit():
            chosen.append(int(part))
        else:
            handle = _read(nvml.nvmlDeviceGetHandleByUUID, part)
            index = _read(nvml.nvmlDeviceGetIndex, handle) if handle is not None else None
            if index is not None:
                chosen.append(index)
    return [index for index in chosen if index < count]


def _ordinals(asked: str | None) -> list[int]:
    """The CUDA numbers of options.gpus ("0,1"); [] where it names none (or not by number)."""
    parts = [part.strip() for part in (asked or "").split(",") if part.strip()]
    return [int(part) for part in parts] if parts and all(part.isdigit() for part in parts) else []


def used_gpus(nvml, on_gpus: str, asked: str | None) -> tuple[list, str]:
    """(NVML handles of the GPUs the cell used, how they were found)."""
    ordinals = None if on_gpus == "one" else _ordinals(asked)
    ids = _cuda_bus_ids(ordinals)
    if on_gpus == "one":
        how = "the row's CUDA device"
    else:
        how = "the GPUs asked for (--gpus)" if ordinals else "every GPU visible (the row uses them all)"
    if ids:
        handles = [_read(nvml.nvmlDeviceGetHandleByPciBusId, bus) for bus in ids]
        if all(handle is not None for handle in handles):
            return handles, f"{how}, by PCI bus ID"
    if ordinals:
        indices, how = ordinals, f"{how}, as NVML numbers them"
    else:
        indices = _visible_indices(nvml)
        how = "every GPU visible (which one the row used is not known here)" if on_gpus == "one" else how
    return [handle for handle in (_read(nvml.nvmlDeviceGetHandleByIndex, index) for index in indices)
            if handle is not None], how


def _nvml():
    """(the started pynvml module, None) or (None, why not)."""
    try:
        import pynvml
    except ImportError:
        return None, INSTALL_HINT
    try:
        pynvml.nvmlInit()  # counted by the driver: starting it again costs nothing
    except Exception as exc:
        return None, f"NVML could not start ({_text(exc).strip() or type(exc).__name__})"
    return pynvml, None


class GpuWatch:
    """Around a cell's counted runs: before() just before them, after() just after; fields() the
    record's `gpu_state` (nothing for a row that runs on no GPU). Never raises."""

    def __init__(self, impl, problem):
        self.on_gpus = getattr(impl, "on_gpus", "") or ""
        options = getattr(problem, "options", None)
        self.asked = getattr(options, "gpus", None)
        self.nvml = self.why = None
        self.gpus: list[dict] = []
        self.handles: list = []
        if self.on_gpus == "several" and getattr(options, "scheduler", None):
            self.on_gpus, self.why = "elsewhere", "the row ran on the GPUs of the Dask cluster at --scheduler"
        if self.on_gpus in ("one", "several"):
            # Started here, before the row's set-up: a first start takes a while, which would
            # otherwise fall between the warm-up and the counted runs.
            self.nvml, self.why = _nvml()

    def before(self) -> None:
        if self.nvml is None:
            return
        try:
            self.handles, self.found_by = used_gpus(self.nvml, self.on_gpus, self.asked)
            if not self.handles:
                self.why = "NVML sees no GPU this row could have used"
                return
            self.gpus = [{"index": _read(self.nvml.nvmlDeviceGetIndex, handle),
                          "name": _text(_read(self.nvml.nvmlDeviceGetName, handle) or "?"),
                          "minor": _read(self.nvml.nvmlDeviceGetMinorNumber, handle),
                          "before": sample(self.nvml, handle)} for handle in self.handles]
        except Exception as exc:  # a GPU's state is never worth a cell
            self.why, self.gpus = f"NVML failed ({type(exc).__name__}: {exc})", []

    def after(self) -> None:
        if not self.gpus:
            return
        try:
            for gpu, handle in zip(self.gpus, self.handles):
                gpu["after"] = sample(self.nvml, handle)
        except Exception as exc:
            self.why, self.gpus = f"NVML failed ({type(exc).__name__}: {exc})", []

    def fields(self) -> dict:
        """{"gpu_state": ...} for a GPU row's record, else {}."""
        if not self.on_gpus:
            return {}
        if not self.gpus:
            return {"gpu_state": {"not_recorded": self.why or "the counted runs never started"}}
        own = own_processes()
        state = {"found_by": self.found_by, "gpus": self.gpus, THROTTLED: throttled(self.gpus),
                 SHARED: shared(self.gpus, own)}
        unseen = hidden(self.gpus, own)
        if unseen:
            state["processes_not_visible"] = unseen  # "not shared" is then not known
        return {"gpu_state": state}


def throttled(gpus: list[dict]) -> list[str]:
    """One line per GPU and look that gave a reason other than HARMLESS for its clocks."""
    lines = []
    for gpu in gpus:
        for when in ("before", "after"):
            look = gpu.get(when) or {}
            slowed = [name for name in look.get("clocks_event_reasons") or [] if name not in HARMLESS]
            if slowed:
                lines.append(f"GPU {gpu['index']} {when} the counted runs: {', '.join(slowed)} "
                             f"(SM clock {look.get('sm_clock_mhz')} MHz, {look.get('temperature_c')} C, "
                             f"{_watts(look.get('power_w'))} of {_watts(look.get('power_limit_w'))})")
    return lines


def _watts(value) -> str:
    return "?" if value is None else f"{value:.0f} W"


def shared(gpus: list[dict], own: set[int]) -> list[str]:
    """One line per other program seen on a GPU the cell used, in either look."""
    lines = []
    for gpu in gpus:
        held_here = _holding(own, gpu.get("minor"))
        seen: dict[int, dict] = {}
        for when in ("before", "after"):
            for process in (gpu.get(when) or {}).get("processes") or []:
                seen.setdefault(process["pid"], process)
        ours = [pid for pid in seen if pid in own]
        if ours or not held_here:
            lines += [f"GPU {gpu['index']}: process {pid} ({_memory(process)})"
                      for pid, process in seen.items() if pid not in own]
        elif len(seen) > held_here:
            # NVML names none of our processes though they hold the GPU: its PIDs are of another
            # PID namespace (a container), so only the count can tell.
            lines.append(f"GPU {gpu['index']}: {len(seen)} processes, {held_here} of them this run's "
                         "(counted by open device files; NVML's process IDs are of another PID namespace)")
    return lines


def hidden(gpus: list[dict], own: set[int]) -> list[str]:
    """The GPUs whose processes NVML does not show here, though this run holds them (a container
    whose PID namespace hides every process, ours too): whether another shared them is unknown."""
    lines = []
    for gpu in gpus:
        looks = [(gpu.get(when) or {}).get("processes") for when in ("before", "after")]
        if any(looks) or not _holding(own, gpu.get("minor")):
            continue
        lines.append(f"GPU {gpu['index']}: NVML lists no process, not even this run's, which holds it "
                     "(another PID namespace): whether another program shared it is not known")
    return lines


def _memory(process: dict) -> str:
    memory = process.get("memory_bytes")
    return "memory not reported" if memory is None else f"{memory / 2**20:,.0f} MiB of GPU memory"


def _parents() -> dict[int, int]:
    """Every process's parent, from /proc (empty elsewhere)."""
    parents = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return parents


def own_processes(pid: int | None = None) -> set[int]:
    """This process, every process it started (the Dask workers of a row, theirs in turn) and its
    parents (the client that started a Dask worker this cell runs on); not its parents' other
    children, which are other programs."""
    pid = os.getpid() if pid is None else pid
    parents = _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    own, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in own:
            own.add(current)
            todo += children.get(current, [])
    up = parents.get(pid)
    while up and up not in own:
        own.add(up)
        up = parents.get(up)
    return own


def _holding(pids: set[int], minor: int | None) -> int:
    """How many of these processes have the GPU's device file (/dev/nvidia<minor>) open."""
    if minor is None:
        return 0
    device, count = f"/dev/nvidia{minor}", 0
    for pid in pids:
        try:
            links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
            count += any(link == device for link in links)
        except OSError:
            continue
    return count


NOTE_PREFIXES = ("timed throttled: ", "timed shared: ")  # how the notes below begin


def notes(state: dict | None) -> list[str]:
    """The record's warnings for a flagged cell: why its times may not be the GPU's."""
    if not state:
        return []
    out = []
    if state.get(THROTTLED):
        out.append(NOTE_PREFIXES[0] + "; ".join(state[THROTTLED])
                   + "; its times may be slower than the GPU runs unthrottled")
    if state.get(SHARED):
        out.append(NOTE_PREFIXES[1] + "another program held the GPU during its counted runs: "
                   + "; ".join(state[SHARED]) + "; its times may include that program's work")
    return out
