"""Errors a user can act on. The CLI prints them as one line and exits non-zero; no traceback."""

# Set (to anything) for the full traceback and torch's own error logs instead of kernelcast's one line.
DEBUG_ENV = "KERNELCAST_DEBUG"


class KernelcastError(Exception):
    """Bad input or an unsupported situation, with a message that says what to do."""


class WorkloadError(KernelcastError):
    """The workload file or its build() could not be loaded or run."""


class CaptureError(KernelcastError):
    """The step could not be captured on this machine."""


class UnknownGPUError(KernelcastError):
    """The --gpu name matches no entry in the device data."""


class UnknownInterconnectError(KernelcastError):
    """The --interconnect name matches no entry in the interconnect data, or the GPU has no natural one."""
