func.func @sum(%input: tensor<1000000xf32>) -> tensor<f32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.expand_shape %input [[0, 1]] output_shape [8, 125000] : tensor<1000000xf32> into tensor<8x125000xf32>
  %init8 = tensor.empty() : tensor<8xf32>
  %fill8 = linalg.fill ins(%cst : f32) outs(%init8 : tensor<8xf32>) -> tensor<8xf32>
  %part = linalg.reduce { arith.addf } ins(%e : tensor<8x125000xf32>) outs(%fill8 : tensor<8xf32>) dimensions = [1]
  %init = tensor.empty() : tensor<f32>
  %fill = linalg.fill ins(%cst : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %result = linalg.reduce { arith.addf } ins(%part : tensor<8xf32>) outs(%fill : tensor<f32>) dimensions = [0]
  return %result : tensor<f32>
}
