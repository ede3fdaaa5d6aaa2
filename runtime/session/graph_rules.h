// The rules every file of the model graph keeps (session*.cpp,
// weight_multiply, gemm_f32, ffn, moe, attention_*, and the helpers they
// share: aligned_buffer.h, parallel_rows.h, row_ops.h, finite_checks.h).
// No code: the files that implement or depend on a rule name it. Internal
// to runtime/session.
//
// The graph's three rules:
//  1. Results are bit-identical however the work is split over threads: each
//     output element's arithmetic (order of operations included) does not
//     depend on the thread count or which thread computes it.
//  2. Regions run on the session's thread pool (platform/thread_pool.h), in
//     slots that never wait for one another; each slot runs its part
//     through RegionError::run (parallel_rows.h), which keeps the first
//     exception (the other slots stop early on failed()), rethrown after the
//     region; allocation and argument checks happen before a region wherever
//     they can.
//  3. Any error rolls the session back to its state before the call: the
//     graph throws Error and leaves the rollback to Session::prefill, so
//     nothing here may change session state other than the chunk's buffers
//     and the cache rows at the chunk's positions.
#pragma once
