"""What is inspected on the way (DESIGN.md): a stage of the call pipeline, not a caller.

detectors.py: the DLP detectors (email, phone, credit_card, iban, secret, private_key,
profile_secret), chosen by measurement (bench/dlp_bench.py); dlp.py: [dlp] rules and the
inspection of a result (redact, block, counts by kind); clearance.py: server classification and
who is cleared for it. services imports guard; guard imports only config, errors and model.
"""
