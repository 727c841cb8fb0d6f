"""The seed's published findings (seed 001), as data: shown beside the live ones, labelled as
the seed's, never used as results."""

SEED_FIGURES = {
    "source": "seed 001_5ca36159b3daf8a4.txt: Yichao Yu, 'OpenCL Event Overhead' (wiki page, Jan 2021); "
              "its results are figures only, so these are its stated findings, not read-off numbers",
    "machine": "Intel UHD 530, Intel UHD 640, AMD Radeon RX 5500 XT (OpenCL, C++ test programs)",
    "tables": {
        "findings": [
            {"experiment": "callbacks", "device": "AMD Radeon RX 5500 XT",
             "finding": "callbacks ~3x the time per run for small buffers; significant up to 2-4 MiB; more spread"},
            {"experiment": "callbacks", "device": "Intel UHD 530 / 640",
             "finding": "absolute overhead larger than AMD's at small sizes, about 10 us; UHD 640 negative from 512 KiB"},
            {"experiment": "wait", "device": "AMD Radeon RX 5500 XT",
             "finding": "clWaitForEvents on another thread: overhead almost completely gone (negligible)"},
            {"experiment": "wait", "device": "Intel UHD 530 / 640",
             "finding": "waiting: about the same overhead as the callback, maybe slightly lower"},
            {"experiment": "dependency", "device": "AMD Radeon RX 5500 XT",
             "finding": "callback on the map event still costly with 7 workers; rises between 4 and 15 MiB total, "
                        "saturates near 0.4 ms; waiting costs 2-3 us; unmap ~0"},
            {"experiment": "dependency", "device": "Intel UHD 530 / 640",
             "finding": "no visible callback/wait overhead (~10 us hidden); unmap gives outliers (530) or a fixed "
                        "relative overhead (640)"},
        ],
    },
    "notes": ["The seed plots time per run (mean line, every measurement a dot) against buffer size, "
              "4 KiB to 32 MiB, 1024 runs per measurement, 150-200 measurements per point."],
}
