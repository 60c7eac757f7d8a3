// placeholder: the gate_chain benchmarks land here
