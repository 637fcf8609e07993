package bench

import _ "embed"

// mlpTorch is reference/mlp_torch.py, the PyTorch twin of overlap's MLP
// inference, which overlap infer --reference runs as python3 - with the
// script on its standard input.
//
//go:embed reference/mlp_torch.py
var mlpTorch []byte

// MLPTorchScript returns the PyTorch twin, reference/mlp_torch.py: it
// measures a model's inference over rows in PyTorch several ways and
// saves the input and its output for overlap to compare with (its
// docstring lists the options). The caller may not change the bytes.
func MLPTorchScript() []byte { return mlpTorch }
