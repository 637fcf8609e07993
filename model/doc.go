// Package model runs a PyTorch-trained multilayer perceptron through
// overlap's pipeline: a stack of nn.Linear layers with ReLU or GELU
// between them, read from the safetensors file that
// safetensors.torch.save_file(model.state_dict(), path) writes.
//
//	m, err := model.Load("mlp.safetensors", model.Options{})
//	k, err := m.Kernel(model.KernelOptions{Precision: model.TF32, Gemm: &gemm})
//	cfg, err := m.Config(0)
//	p, err := pipeline.New(backend, cfg)
//	rep, err := p.Run(ctx, pipeline.Job{N: rows, Kernel: k,
//		Inputs: []pipeline.Buffer{pipeline.Rows(x, m.In())}, Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())}})
//	err = m.Verify(x, y, model.VerifyOptions{Precision: model.TF32})
//
// It sits above packages pipeline (which runs the layers as the steps of
// one kernel: each chunk of rows goes through every layer's GEMM in turn,
// the weights resident on each device, the activations between layers in
// scratch buffers) and ptx/kernels (whose GEMM module the steps launch);
// nothing below imports it.
//
// The safetensors reader ([ReadSafetensors]) is this package's own and
// strict: it checks the header's length, JSON and offsets against the file
// and names the tensor at fault. F32 tensors are read as they are, F16
// and BF16 converted exactly to float32; other dtypes are refused. A
// layer without bias (nn.Linear(bias=False)) gets zeros.
//
// The activation between layers is, in order: the one given in
// [Options], the file's "activation" metadata (what [Model.Write] and
// overlap infer --gen-model record), ReLU. An activation given explicitly
// wins over the file's, and Model.ActivationFrom says which decided.
//
// # Verification
//
// [Model.Forward] computes the model in float64 from the float32 inputs
// and weights; [Model.Verify] compares every output value with it, each
// within a bound of the GPU's rounding error that it propagates layer by
// layer ([Precision.Tolerance]): a layer of K inputs may be off by
// p·(Σ|x·w| + |b|) with p = (K+1)·2⁻²³ in FP32 (float32 accumulation in any
// order, with a factor 2 of margin) or 2⁻⁹ + 2⁻²⁰ + (K+1)·2⁻²³ in TF32 (each
// factor's 10-bit mantissa, truncated or rounded), plus the error its
// inputs carry in, Σ|w·e|. Both sums are bounded by Cauchy–Schwarz,
// ‖w‖₂·‖v‖₂, which needs no second pass over the weights and is at most
// about 1.6 times the exact sum for weights and inputs of random sign.
// ReLU passes an error on, except where the value is below minus its
// error (both are then exactly 0); GELU multiplies it by its largest slope,
// 1.13, and adds 2⁻²⁰·|z| for its own evaluation. These are worst-case
// bounds, so they grow with depth faster than real errors do, and a
// correct result stays well inside them (bench/RESULTS.md, "Notes moved
// from the package docs (2026-12-01)", has how far inside on the tests'
// models); for one or two layers a TF32 result is outside the FP32 bound,
// for deeper models not necessarily. A wrong weight, bias, layout or
// activation falls far outside either.
//
// # Comparing two outputs
//
// [Model.Compare] checks two outputs of the same rows against each other,
// such as overlap's GPU output and PyTorch's, without the float64
// reference: each is within its precision's bound of the exact result,
// so they may differ by the sum of the two bounds ([CompareTolerance]).
// Verify's bound needs each layer's exact input to a row, which costs as
// much as the model's arithmetic; Compare bounds the same terms by norms,
// which cost one pass over the rows' inputs:
//
//   - a row's input x contributes ‖x‖₂, exactly;
//   - a hidden layer's exact output z = Wx + b has ‖z‖₂ ≤ σ(W)·‖x‖₂ + ‖b‖₂,
//     with σ(W), W's largest singular value, bounded from above once per
//     layer by f·tr(G⁸)^(1/16) (f = ‖W‖_F, G the Gram matrix of W/f: at
//     most n^(1/16) times σ for n-wide layers, 1.1–1.3 times for random
//     weights), and both activations have |act(z)| ≤ |z|;
//   - the error a layer carries in, a vector e over its inputs, enters by
//     ‖e‖₂, as in Verify: a layer adds at most p·(‖W‖_F·(‖x‖₂ + ‖e‖₂) +
//     ‖b‖₂) to the norm of its outputs' errors (p the precision's error
//     per term, ‖W‖_F the norm over outputs of each output's ‖w‖₂) and
//     passes ‖W‖_F·‖e‖₂ on; GELU multiplies the result by 1.13 and adds
//     2⁻²⁰ of its input's norm.
//
// Each step bounds Verify's own term from above, so each value's
// tolerance is at least the sum of the two outputs' Verify bounds, and
// on random models not much more; a wrong weight, layout or activation
// falls far outside it.
//
// The loops are written by hand rather than with gonum: they need
// neither a float64 copy of the input nor a dependency, and four rows by
// two outputs at a time keep the scalar float64 units busy.
//
// # Concurrency
//
// A Model is read-only once loaded: its methods, and the steps of its
// kernels, are safe for concurrent use. Forward, Verify, Forward32 and the
// CPU stand-ins use every CPU.
//
// # Memory
//
// A Model holds its weights as float32, and, from the first Forward or
// Verify, a float64 copy of them. Verify and Forward work through the
// input in blocks of 64 rows a goroutine. The pipeline kernel's
// parameters point at the model's weights; the pipeline copies them to
// each device once.
package model
