"""The CPU's model name, for the Python benchmarks' headers (bench/torch_*.py): every figure
is recorded with the CPU it was measured on."""
import platform


def cpu_model():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
