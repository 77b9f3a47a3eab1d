# shapes.cmake — shapes and layouts: channels-last convolution and tdm_tensor_permute
# (test_layout.c), torch.matmul's forms (test_matmul.c), F.cross_entropy's forms
# (test_cross_entropy.c). test_layout: on the cpu,
# NHWC conv2d equals NCHW conv2d permuted bit for bit (forward, backward, autograd) and permute's
# values, refusals and gradient; on cuda:0 (label gpu, exit 77 with one line without a device)
# permute matches the cpu and NHWC conv2d matches the reference within its rounding bound.
tdm_test_executable(layout)
add_test(NAME layout.cpu COMMAND test_layout cpu)
add_test(NAME gpu.layout.cuda0 COMMAND test_layout cuda)
set_tests_properties(gpu.layout.cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# torch.matmul's shape rules (test_matmul.c): 1-D operands, broadcast batch dims, empty batches,
# each result against 2-D products of its slices; refusals with their messages.
tdm_test_executable(matmul)
add_test(NAME matmul.forms COMMAND test_matmul)

# F.cross_entropy's forms (test_cross_entropy.c): non-finite logits as PyTorch, spatial = rows,
# autograd through the weighted form, refusals.
tdm_test_executable(cross_entropy)
add_test(NAME cross_entropy.forms COMMAND test_cross_entropy)
# the fused classifier on cuda:0: autograd = explicit backward bit for bit, the slot reads its stats
add_test(NAME cross_entropy.gpu_fused COMMAND test_cross_entropy gpu_fused)
set_tests_properties(cross_entropy.gpu_fused PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
