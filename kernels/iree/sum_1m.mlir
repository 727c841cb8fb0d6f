func.func @sum(%input: tensor<1000000xf32>) -> tensor<f32> {
  %cst = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<f32>
  %fill = linalg.fill ins(%cst : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %result = linalg.reduce { arith.addf }
    ins(%input : tensor<1000000xf32>)
    outs(%fill : tensor<f32>)
    dimensions = [0]
  return %result : tensor<f32>
}
