"""The benchmark harness, along its data path: plan/ (what to send), client/ (HTTP),
records.py (the raw facts), analysis/ (judging them), run/ (orchestration, on top),
calibrate/ (checking the client itself), peers/ (other tools' result files).
See CONTRIBUTING.md for what each folder may import."""
