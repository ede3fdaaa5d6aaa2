# The kernel families: one folder each under kernels/ (see latte_kernel_family).
latte_kernel_family(dot_f32)
latte_kernel_family(matvec)
target_sources(latte_kernels PRIVATE kernels/matvec/matvec_x16.cpp)  # its row-interleaved layout
latte_kernel_family(mla_attn)
latte_kernel_family(swiglu_f32)
latte_kernel_family(softmax_f32)
