"""ECG components: preprocessing to the standard 12-lead 100 Hz layout, R-peak detectors, the QRS and
fixed-window tokenizers (HeartLang's heartbeat "words" and lead-by-lead "sentences"), the NormEMA vector
quantiser, the VQ-HBR tokenizer model, the masked ECG-sentence model, the linear probe, synthetic ECG sources
and readers for PTB-XL benchmark arrays and WFDB records."""
