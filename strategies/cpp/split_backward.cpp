// A stage's backward split in two passes (zero-bubble's I and W), as PyTorch's pipelining
// stages split it (`stage_backward_input` / `stage_backward_weight`), through libtorch's
// autograd engine:
//
// I walks the graph from the stage's output to its input only: the engine runs just the
// nodes on paths to the input, and those nodes skip their weights' gradients. On the way it
// captures the gradient flowing into every node where a weight's path leaves the input's
// (a convolution, a batch norm, an addmm): the "meeting" nodes.
//
// W then starts the engine once per meeting node from its captured gradient, restricted to
// the weights reachable from it without going back onto the input's path. Each weight's
// gradient is computed once, from the same incoming gradient as a whole backward would use,
// and accumulates into `.grad`; no input-gradient work is repeated beyond re-entering each
// meeting node. A weight used at two meeting nodes (shared weights) would have its second
// use summed twice, so it is refused.
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "shim_call.h"

namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;
using NodePtr = c10::intrusive_ptr<Node>;

// One W pass: a meeting node, the gradients captured at its inputs in I, and the weights'
// accumulators it reaches off the input's path.
struct WeightPass {
  NodePtr node;
  edge_list roots;
  variable_list grads;
  edge_list weights;
};

}  // namespace

// What I leaves for W (opaque to Rust).
struct StratlabSplitBackward {
  std::vector<WeightPass> passes;
};

namespace {

// Every node reachable from `root`, children before parents (a post-order).
std::vector<Node*> post_order(Node* root) {
  std::vector<Node*> order;
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->next_edges().size()) {
      Node* child = node->next_edges()[next++].function.get();
      if (child != nullptr && seen.insert(child).second) {
        stack.emplace_back(child, 0);
      }
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

// The weights' accumulators reachable from `from`, a node off the input's path.
void collect_weights(const NodePtr& from, edge_list& weights, std::unordered_set<Node*>& seen) {
  std::vector<NodePtr> stack{from};
  while (!stack.empty()) {
    NodePtr node = stack.back();
    stack.pop_back();
    if (!seen.insert(node.get()).second) continue;
    if (dynamic_cast<torch::autograd::AccumulateGrad*>(node.get()) != nullptr) {
      weights.emplace_back(node, 0);
      continue;
    }
    for (const Edge& edge : node->next_edges()) {
      if (edge.function) stack.push_back(edge.function);
    }
  }
}

StratlabSplitBackward* input_pass(const at::Tensor& output, const at::Tensor& grad, const at::Tensor& input,
                                  at::Tensor& input_grad) {
  Edge root = torch::autograd::impl::gradient_edge(output);
  Edge input_edge = torch::autograd::impl::gradient_edge(input);
  TORCH_CHECK(root.function, "the stage's output has no graph to back-propagate");
  TORCH_CHECK(input_edge.function, "the stage's input does not require a gradient");
  // Which nodes lead to the input.
  std::vector<Node*> order = post_order(root.function.get());
  std::unordered_map<Node*, bool> to_input;
  for (Node* node : order) {
    bool leads = node == input_edge.function.get();
    for (const Edge& edge : node->next_edges()) {
      leads = leads || (edge.function && to_input[edge.function.get()]);
    }
    to_input[node] = leads;
  }
  TORCH_CHECK(to_input[root.function.get()], "the stage's output does not depend on its input");
  auto split = std::make_unique<StratlabSplitBackward>();
  std::unordered_set<Node*> claimed;
  edge_list captures{input_edge};
  // Output side first, as a whole backward reaches them.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* raw = *it;
    if (!to_input[raw] || raw == input_edge.function.get()) continue;
    WeightPass pass;
    std::unordered_set<Node*> seen;
    for (const Edge& edge : raw->next_edges()) {
      if (edge.function && !to_input[edge.function.get()]) collect_weights(edge.function, pass.weights, seen);
    }
    if (pass.weights.empty()) continue;
    for (const Edge& weight : pass.weights) {
      TORCH_CHECK(claimed.insert(weight.function.get()).second,
                  "a weight is used in two places of the stage: its split backward would count one use twice");
    }
    // The node's own pointer, shared (intrusive): it and its graph stay alive until W.
    pass.node = c10::intrusive_ptr<Node>::unsafe_reclaim_from_nonowning(raw);
    for (uint32_t input_nr = 0; input_nr < raw->num_inputs(); ++input_nr) {
      pass.roots.emplace_back(pass.node, input_nr);
      captures.emplace_back(pass.node, input_nr);
    }
    split->passes.push_back(std::move(pass));
  }
  auto& engine = torch::autograd::Engine::get_default_engine();
  variable_list captured = engine.execute({root}, {grad}, /*keep_graph=*/true, /*create_graph=*/false,
                                          /*accumulate_grad=*/false, captures);
  input_grad = captured[0];
  size_t at = 1;
  for (WeightPass& pass : split->passes) {
    edge_list roots;
    for (const Edge& root_edge : pass.roots) {
      const at::Tensor& gradient = captured[at++];
      // An input of a node that got no gradient (a batch norm's saved statistics).
      if (gradient.defined()) {
        roots.push_back(root_edge);
        pass.grads.push_back(gradient);
      }
    }
    pass.roots = std::move(roots);
  }
  return split.release();
}

void weight_pass(StratlabSplitBackward& split) {
  auto& engine = torch::autograd::Engine::get_default_engine();
  for (WeightPass& pass : split.passes) {
    if (pass.roots.empty()) continue;
    engine.execute(pass.roots, pass.grads, /*keep_graph=*/true, /*create_graph=*/false, /*accumulate_grad=*/true,
                   pass.weights);
    pass.grads.clear();
  }
}

}  // namespace

extern "C" {

// I: back-propagates `grad` (the gradient of the loss with respect to `output`) to `input`
// alone, returning the input's gradient in `*input_grad` (a new tensor, owned by the
// caller) and what W needs in `*split` (freed with stratlab_split_backward_free). 0 on
// success, 1 on failure (message in stratlab_shim_last_error).
int stratlab_backward_input(at::Tensor* output, at::Tensor* grad, at::Tensor* input, at::Tensor** input_grad,
                            StratlabSplitBackward** split) {
  return stratlab::guarded([&] {
    at::Tensor gradient;
    *split = input_pass(*output, *grad, *input, gradient);
    *input_grad = new at::Tensor(std::move(gradient));
  });
}

// W: the weights' gradients from what I captured, accumulated into their `.grad`.
int stratlab_backward_weight(StratlabSplitBackward* split) {
  return stratlab::guarded([&] { weight_pass(*split); });
}

void stratlab_split_backward_free(StratlabSplitBackward* split) { delete split; }

}  // extern "C"
