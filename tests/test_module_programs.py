"""Module programs in the style of crawled GitHub model code, each captured as one graph (issue 9).

Every program is an ``nn.Module`` class plus an input factory (``@program``).  A test builds
two copies of the module (same seed), calls one eagerly and the other under
``dynacap.optimize(model, fullgraph=True)`` twice, and compares results, inputs and the
module's state after each call (programs that write through ``.data`` change their
parameters); the capture must be exactly one graph.  Programs that mutate state or leave Python
also run under ``aot_eager``.  Programs grouped ``scalar`` read a tensor's value (``.item()``)
and run with ``capture_scalar_outputs`` on; ``dynamic`` ones make data-dependent sizes
(``nonzero``, masks) and run with ``capture_dynamic_output_shape_ops`` on.

Programs dynacap does not capture in one graph today are listed in ``KNOWN_BREAKS`` with the
break reason it gives; they stay in the suite as strict xfails.  ``benchmarks/module_programs.py``
runs the same programs under torch.compile and prints the graph counts side by side.
"""
import collections
import contextlib
import dataclasses
import functools
import itertools
import math
import operator
import typing
import warnings
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Variable
from torch.ao.nn.quantized import FloatFunctional
from torch.distributions import Bernoulli, Categorical, Normal, kl_divergence
from torch.nn.utils import parameters_to_vector
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import dynacap
from differential import CountingBackend, assert_same, clone_inputs


@dataclasses.dataclass
class Program:
    name: str
    module: type
    inputs: typing.Callable[[], tuple]
    group: str = "default"

    def build(self):
        """A fresh module (eval mode unless the program trains) and fresh inputs, both seeded."""
        torch.manual_seed(0)
        model = self.module()
        torch.manual_seed(1)
        return model, self.inputs()

    def settings(self):
        """dynacap's (and torch.compile's, for the benchmark) settings this program's group needs."""
        setting = GROUP_SETTINGS.get(self.group)
        if setting is None:
            return contextlib.nullcontext()
        import torch._dynamo

        stack = contextlib.ExitStack()
        stack.enter_context(dynacap.config.patch(**{setting: True}))
        stack.enter_context(torch._dynamo.config.patch(**{setting: True}))
        return stack


#: The setting (same name in dynacap.config and torch._dynamo.config) each group runs with.
GROUP_SETTINGS = {"scalar": "capture_scalar_outputs", "dynamic": "capture_dynamic_output_shape_ops"}


PROGRAMS: Dict[str, Program] = {}


def program(inputs, group="default"):
    def register(cls):
        name = cls.__name__
        assert name not in PROGRAMS, name
        PROGRAMS[name] = Program(name, cls, inputs, group)
        return cls
    return register


def rand(*shape, requires_grad=False):
    return torch.randn(*shape).requires_grad_(requires_grad)


X48 = lambda: (rand(4, 8),)  # noqa: E731
X48G = lambda: (rand(4, 8, requires_grad=True),)  # noqa: E731
IMG = lambda: (rand(2, 3, 8, 8),)  # noqa: E731


# -- tensor.data: reads and in-place updates through it ------------------------------------------------------

@program(X48)
class data_weight_clipping(nn.Module):
    """WGAN critic: clamp the weights through ``.data`` before the forward."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        for p in self.parameters():
            p.data.clamp_(-0.1, 0.1)
        return self.fc(x)


@program(X48)
class data_ema_buffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.zeros(8))

    def forward(self, x):
        self.running.data.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.running


@program(X48G)
class data_read_detached(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        baseline = x.data * 2
        return self.fc(x) + baseline, baseline.requires_grad


@program(X48)
class data_momentum_encoder_inplace(nn.Module):
    """BYOL/MoCo: the key encoder follows the query encoder (``p_k.data.mul_(m).add_(...)``)."""

    def __init__(self):
        super().__init__()
        self.online = nn.Linear(8, 4)
        self.target = nn.Linear(8, 4)
        self.m = 0.99

    def forward(self, x):
        for p_o, p_t in zip(self.online.parameters(), self.target.parameters()):
            p_t.data.mul_(self.m).add_(p_o.data, alpha=1 - self.m)
        return self.online(x), self.target(x)


@program(X48)
class data_momentum_encoder_assign(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Linear(8, 4)
        self.target = nn.Linear(8, 4)

    def forward(self, x):
        for p_o, p_t in zip(self.online.parameters(), self.target.parameters()):
            p_t.data = p_t.data * 0.9 + p_o.data * 0.1
        return self.target(x)


@program(X48)
class data_weight_renorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        w = self.weight.data
        w.div_(w.norm(dim=1, keepdim=True))
        return F.linear(x, self.weight)


@program(X48)
class data_fill_in_no_grad(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(8))

    def forward(self, x):
        with torch.no_grad():
            self.scale.data.fill_(0.5)
        return x * self.scale


# -- torch.autograd.Variable and legacy constructors ---------------------------------------------------------

@program(X48)
class variable_wrap_input(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = Variable(x)
        return self.fc(x)


@program(lambda: (rand(2, 5, 8),))
class variable_init_hidden(nn.Module):
    """Old RNN tutorials: ``h0 = Variable(torch.zeros(...))`` then a hand-written recurrent cell."""

    def __init__(self):
        super().__init__()
        self.hidden = 6
        self.cell = nn.RNNCell(8, 6)

    def forward(self, x):
        h = Variable(torch.zeros(x.size(0), self.hidden), requires_grad=False)
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
        return h


@program(X48)
class variable_new_zero(nn.Module):
    def forward(self, x):
        h = Variable(x.data.new(x.size(0), 3).zero_())
        return torch.cat([x, h], dim=1)


@program(IMG)
class floattensor_mean_std(nn.Module):
    def forward(self, x):
        mean = torch.FloatTensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        std = torch.FloatTensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        return (x - mean) / std


@program(X48)
class tensor_sizes_fill(nn.Module):
    def forward(self, x):
        bias = torch.Tensor(1, 8).fill_(0.25)
        return x + bias


@program(X48)
class new_with_sizes(nn.Module):
    def forward(self, x):
        ones = x.new(x.size(0), 2).fill_(1.0)
        return torch.cat([x, ones], 1)


@program(X48)
class new_from_list(nn.Module):
    def forward(self, x):
        w = x.new([1.0, -1.0]).repeat(4)
        return x * w


@program(X48)
class new_zeros_ones_full(nn.Module):
    def forward(self, x):
        pad = x.new_zeros(x.shape[0], 2)
        mask = x.new_ones(x.shape)
        fill = x.new_full((x.shape[0], 1), 3.0)
        return torch.cat([x * mask, pad, fill], dim=1), x.new_tensor([1, 2]).dtype


@program(X48)
class type_float64(nn.Module):
    def forward(self, x):
        y = x.type(torch.float64)
        return y.sum(1), y.dtype


@program(X48)
class type_string_name(nn.Module):
    def forward(self, x):
        return x.type("torch.DoubleTensor") * 2, x.type()


@program(X48)
class longtensor_index(nn.Module):
    def forward(self, x):
        idx = torch.LongTensor([0, 2, 5])
        return x[:, idx]


@program(X48)
class type_as_weight(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        mask = (x > 0).type_as(self.fc.weight)
        return self.fc(x * mask)


@program(X48)
class requires_grad_on_new(nn.Module):
    def forward(self, x):
        w = torch.ones(8).requires_grad_()
        return x * w, w.requires_grad


# -- modules created inside forward --------------------------------------------------------------------------

@program(X48)
class relu_made_in_forward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return nn.ReLU()(self.fc(x))


@program(X48)
class softmax_made_in_forward(nn.Module):
    def forward(self, x):
        return nn.Softmax(dim=1)(x)


@program(X48)
class dropout_zero_made_in_forward(nn.Module):
    def forward(self, x):
        return nn.Dropout(0.0)(x) + nn.Dropout(p=0.0, inplace=False)(x)


@program(X48)
class activation_by_name(nn.Module):
    def __init__(self, act="GELU"):
        super().__init__()
        self.act = act

    def forward(self, x):
        return getattr(nn, self.act)()(x)


@program(lambda: (rand(4, 8), rand(4, 8)))
class loss_module_in_forward(nn.Module):
    def forward(self, pred, target):
        return nn.MSELoss()(pred, target) + nn.L1Loss(reduction="mean")(pred, target)


@program(IMG)
class flatten_identity_in_forward(nn.Module):
    def forward(self, x):
        return nn.Identity()(nn.Flatten()(x))


@program(X48)
class leaky_relu_inplace_in_forward(nn.Module):
    def forward(self, x):
        y = x * 2
        return nn.LeakyReLU(0.2, inplace=True)(y)


@program(X48)
class sequential_made_in_forward(nn.Module):
    def forward(self, x):
        return nn.Sequential(nn.Tanh(), nn.ReLU())(x)


# -- optional submodules: `if self.bn:` ----------------------------------------------------------------------

class ConvBlock(nn.Module):
    def __init__(self, use_bn=True, act=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4) if use_bn else None
        self.act = nn.ReLU() if act else None

    def forward(self, x):
        x = self.conv(x)
        if self.bn:
            x = self.bn(x)
        if self.act is not None:
            x = self.act(x)
        return x


@program(IMG)
class optional_bn_present(ConvBlock):
    def __init__(self):
        super().__init__(use_bn=True)
        self.eval()


@program(IMG)
class optional_bn_absent(ConvBlock):
    def __init__(self):
        super().__init__(use_bn=False, act=False)


@program(X48)
class optional_downsample_sequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 4)
        self.downsample = nn.Sequential(nn.Linear(8, 4))
        self.extra = nn.Sequential()

    def forward(self, x):
        identity = x
        if self.downsample:
            identity = self.downsample(x)
        out = self.body(x) + identity
        if self.extra:
            out = self.extra(out)
        return out


@program(X48)
class modulelist_truth(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(8, 2) for _ in range(3)])
        self.aux = nn.ModuleList()

    def forward(self, x):
        outs = []
        if self.heads:
            outs = [h(x) for h in self.heads]
        if not self.aux:
            outs.append(x.sum(1, keepdim=True))
        return torch.cat(outs, 1)


# -- staticmethods and classmethods through self -------------------------------------------------------------

@program(X48)
class staticmethod_through_self(nn.Module):
    @staticmethod
    def _pad(x, n):
        return F.pad(x, (0, n))

    def forward(self, x):
        return self._pad(x, 2) * 2


@program(X48)
class classmethod_through_self(nn.Module):
    EPS = 1e-5

    @classmethod
    def normalize(cls, x):
        return x / (x.norm(dim=-1, keepdim=True) + cls.EPS)

    def forward(self, x):
        return self.normalize(x)


@program(X48)
class staticmethod_through_type(nn.Module):
    @staticmethod
    def swish(x):
        return x * torch.sigmoid(x)

    def forward(self, x):
        return type(self).swish(x) + self.__class__.swish(x)


# -- walking the module tree inside forward ------------------------------------------------------------------

@program(X48)
class parameters_l2_penalty(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        reg = sum(p.pow(2).sum() for p in self.parameters())
        return self.fc2(torch.relu(self.fc1(x))), reg


@program(X48)
class children_loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Tanh()
        self.c = nn.Linear(8, 3)

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x


@program(X48)
class named_modules_filter(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))

    def forward(self, x):
        norms = []
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                norms.append(m.weight.norm())
        return self.body(x), torch.stack(norms)


@program(X48)
class parameterlist_iteration(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(8, 8) * 0.1) for _ in range(3)])

    def forward(self, x):
        for w in self.weights:
            x = torch.tanh(x @ w)
        return x


@program(X48)
class parameterlist_index_len(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(torch.full((8,), float(i))) for i in range(4)])

    def forward(self, x):
        return sum(x * self.scales[i] for i in range(len(self.scales)))


@program(X48)
class named_parameters_no_bias(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        decay = 0.0
        for n, p in self.named_parameters():
            if "bias" not in n:
                decay = decay + p.abs().sum()
        return self.out(self.fc(x)), decay


@program(X48)
class modules_count_isinstance(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU())

    def forward(self, x):
        n_relu = sum(1 for m in self.modules() if isinstance(m, nn.ReLU))
        return self.layers(x) / n_relu


@program(X48)
class parameterdict_items(nn.Module):
    def __init__(self):
        super().__init__()
        self.gains = nn.ParameterDict({"a": nn.Parameter(torch.ones(8)), "b": nn.Parameter(torch.randn(8))})

    def forward(self, x):
        for key, g in self.gains.items():
            x = x * g if key == "a" else x + g
        return x


@program(X48)
class buffers_loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.randn(8))
        self.register_buffer("gain", torch.rand(8))

    def forward(self, x):
        for b in self.buffers():
            x = x * b
        return x


@program(lambda: (rand(4, 8).double(),))
class next_parameters_dtype(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        p = next(self.parameters())
        return self.fc(x.to(device=p.device, dtype=p.dtype))


# -- torch.distributions -------------------------------------------------------------------------------------

class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mu = nn.Linear(8, 2)
        self.log_std = nn.Parameter(torch.zeros(2))


@program(lambda: (rand(4, 8), rand(4, 2)))
class normal_log_prob(GaussianPolicy):
    def forward(self, obs, action):
        dist = Normal(self.mu(obs), self.log_std.exp(), validate_args=False)
        return dist.log_prob(action).sum(-1)


@program(X48)
class normal_entropy(GaussianPolicy):
    def forward(self, obs):
        dist = Normal(self.mu(obs), self.log_std.exp(), validate_args=False)
        return dist.entropy().sum(-1), dist.mean, dist.stddev


@program(X48)
class normal_rsample_tanh(GaussianPolicy):
    """SAC actor: reparameterised sample squashed by tanh, with its log-probability correction."""

    def forward(self, obs):
        dist = Normal(self.mu(obs), self.log_std.exp(), validate_args=False)
        u = dist.rsample()
        a = torch.tanh(u)
        logp = dist.log_prob(u).sum(-1) - torch.log(1 - a.pow(2) + 1e-6).sum(-1)
        return a, logp


@program(lambda: (rand(4, 8), torch.tensor([0, 2, 1, 4])))
class categorical_log_prob_entropy(nn.Module):
    def __init__(self):
        super().__init__()
        self.logits = nn.Linear(8, 5)

    def forward(self, obs, action):
        dist = Categorical(logits=self.logits(obs), validate_args=False)
        return dist.log_prob(action), dist.entropy()


@program(X48)
class normal_kl_divergence(nn.Module):
    """VAE: KL between the encoder's Normal and the unit prior."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 4)

    def forward(self, x):
        mu, log_var = self.enc(x).chunk(2, dim=-1)
        q = Normal(mu, torch.exp(0.5 * log_var), validate_args=False)
        p = Normal(torch.zeros_like(mu), torch.ones_like(mu), validate_args=False)
        return kl_divergence(q, p).sum(-1)


@program(lambda: (rand(4, 8), (torch.rand(4, 3) > 0.5).float()))
class bernoulli_log_prob(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x, y):
        return Bernoulli(logits=self.fc(x), validate_args=False).log_prob(y)


# -- torch.ao FloatFunctional --------------------------------------------------------------------------------

@program(IMG)
class floatfunctional_residual_add(nn.Module):
    """Quantization-ready residual block: ``self.skip_add.add(out, identity)``."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.skip_add = FloatFunctional()

    def forward(self, x):
        return self.skip_add.add(self.conv(x), x)


@program(X48)
class floatfunctional_mul_add_scalar(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = FloatFunctional()

    def forward(self, x):
        return self.ff.add_scalar(self.ff.mul(x, x), 1.0), self.ff.mul_scalar(x, 3.0)


@program(X48)
class floatfunctional_cat_relu(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = FloatFunctional()

    def forward(self, x):
        return self.ff.add_relu(self.ff.cat([x, -x], dim=1), torch.ones(4, 16))


# -- torch.utils.checkpoint ----------------------------------------------------------------------------------

@program(X48G)
class checkpoint_block(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False) + x


def attention_core(q, k):
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)), -1) @ k


@program(lambda: (rand(2, 4, 8, requires_grad=True), rand(2, 4, 8)))
class checkpoint_function(nn.Module):
    def forward(self, q, k):
        return checkpoint(attention_core, q, k, use_reentrant=False)


@program(X48G)
class checkpoint_sequential_segments(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)


# -- torch.nn.utils ------------------------------------------------------------------------------------------

@program(X48)
class parameters_to_vector_norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        flat = parameters_to_vector(self.parameters())
        return self.fc(x), flat.norm(), flat.numel()


@program(lambda: ([rand(3, 4), rand(5, 4), rand(2, 4)],))
class pad_sequence_batch(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 2)

    def forward(self, seqs: List[Tensor]):
        padded = pad_sequence(seqs, batch_first=True, padding_value=0.0)
        return self.proj(padded)


@program(lambda: (rand(3, 5, 4), torch.tensor([5, 3, 2])))
class packed_lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=True)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return out


@program(lambda: (torch.randint(0, 20, (4, 6)), [6, 2, 5, 3]))
class packed_text_encoder(nn.Module):
    """A text encoder: embeddings of unsorted sequences, a bidirectional GRU over them, mean over the steps."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8, padding_idx=0)
        self.gru = nn.GRU(8, 5, num_layers=2, bidirectional=True)
        self.head = nn.Linear(10, 3)

    def forward(self, tokens, lengths: List[int]):
        packed = pack_padded_sequence(self.embed(tokens).transpose(0, 1), lengths, enforce_sorted=False)
        out, hidden = self.gru(packed)
        out, out_lengths = pad_packed_sequence(out, total_length=tokens.size(1))
        pooled = out.sum(0) / out_lengths.unsqueeze(1).to(out.dtype)
        return self.head(pooled), hidden[-2:].transpose(0, 1).flatten(1)


@program(X48)
class spectral_norm_eval(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.utils.spectral_norm(nn.Linear(8, 4))
        self.eval()

    def forward(self, x):
        return self.fc(x)


# -- torch.nn.functional everywhere --------------------------------------------------------------------------

@program(lambda: (rand(2, 5, 8),))
class functional_mlp_block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(16, 8) * 0.1)
        self.w2 = nn.Parameter(torch.randn(8, 16) * 0.1)

    def forward(self, x):
        h = F.layer_norm(x, (8,))
        h = F.gelu(F.linear(h, self.w1))
        h = F.dropout(h, p=0.1, training=False)
        return x + F.linear(h, self.w2)


@program(IMG)
class functional_interpolate_pool(nn.Module):
    def forward(self, x):
        up = F.interpolate(x, scale_factor=2, mode="nearest")
        return F.adaptive_avg_pool2d(up, 1).flatten(1), F.max_pool2d(x, 2)


@program(IMG)
class functional_pad_conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3, 3, 3) * 0.1)

    def forward(self, x):
        x = F.pad(x, (1, 1, 1, 1), mode="reflect")
        return F.relu(F.conv2d(x, self.weight, stride=1))


@program(lambda: (rand(2, 2, 5, 4), rand(2, 2, 5, 4), rand(2, 2, 5, 4)))
class functional_sdpa(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@program(lambda: (rand(6, 5), torch.tensor([0, 1, 4, 2, 3, 1])))
class functional_losses(nn.Module):
    def forward(self, logits, target):
        ce = F.cross_entropy(logits, target, label_smoothing=0.1)
        nll = F.nll_loss(F.log_softmax(logits, dim=-1), target)
        onehot = F.one_hot(target, num_classes=5).float()
        return ce, nll, F.binary_cross_entropy_with_logits(logits, onehot)


@program(lambda: (rand(4, 8), rand(4, 8)))
class functional_cosine_normalize(nn.Module):
    def forward(self, a, b):
        a = F.normalize(a, dim=-1)
        return F.cosine_similarity(a, b, dim=-1), F.pairwise_distance(a, b)


@program(lambda: (torch.tensor([[1, 2, 0], [3, 3, 1]]),))
class functional_embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(5, 4))

    def forward(self, ids):
        return F.embedding(ids, self.table, padding_idx=0).mean(1)


@program(IMG)
class functional_affine_grid_sample(nn.Module):
    def __init__(self):
        super().__init__()
        self.theta = nn.Parameter(torch.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.0]]]))

    def forward(self, x):
        grid = F.affine_grid(self.theta.expand(x.size(0), 2, 3), list(x.size()), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)


# -- typing helpers ------------------------------------------------------------------------------------------

@program(X48)
class jit_annotate_list(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(8, 2), nn.Linear(8, 3)])

    def forward(self, x):
        outs = torch.jit.annotate(List[Tensor], [])
        for h in self.heads:
            outs.append(h(x))
        return torch.cat(outs, dim=1)


@program(lambda: (rand(4, 8), None))
class optional_mask_argument(nn.Module):
    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        if mask is not None:
            x = x.masked_fill(mask, 0.0)
        return x.softmax(-1)


@program(X48)
class typing_cast_result(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        y = typing.cast(Tensor, self.fc(x))
        sizes = typing.cast(List[int], list(y.shape))
        return y, sizes


@program(X48)
class jit_annotate_dict(nn.Module):
    def forward(self, x):
        feats = torch.jit.annotate(Dict[str, Tensor], {})
        feats["mean"] = x.mean(0)
        feats["max"] = x.amax(0)
        return feats


@program(lambda: ((rand(4, 8), rand(4, 8)),))
class tuple_or_tensor_input(nn.Module):
    def forward(self, x: Tuple[Tensor, Tensor]) -> Tensor:
        if isinstance(x, (list, tuple)):
            x = torch.cat(list(x), dim=0)
        return x * 2


@program(X48)
class typing_alias_subscript(nn.Module):
    """Subscripted aliases evaluated in forward (``List[int]``, ``Optional[Tensor]``) as annotations of helpers."""

    def forward(self, x):
        shape_t = List[int]
        maybe = Optional[Tensor]
        return x.view(2, 16), shape_t is not None and maybe is not None


# -- torch.jit.is_scripting() / torch.compiler.is_compiling() ------------------------------------------------

@program(X48)
class is_scripting_branch(nn.Module):
    def forward(self, x):
        if not torch.jit.is_scripting():
            x = x + 1
        if torch.jit.is_tracing():
            x = x * 0
        return x


@program(X48)
class is_compiling_branch(nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling():
            return F.relu(x)
        return x.clamp(min=0)


# -- warnings under a flag -----------------------------------------------------------------------------------

@program(X48)
class warn_flag_off(nn.Module):
    def __init__(self):
        super().__init__()
        self.legacy = False

    def forward(self, x):
        if self.legacy:
            warnings.warn("legacy mode is deprecated", DeprecationWarning)
        return x * 2


@program(X48)
class warn_flag_on(nn.Module):
    def __init__(self):
        super().__init__()
        self.legacy = True

    def forward(self, x):
        if self.legacy:
            warnings.warn("legacy mode is deprecated", DeprecationWarning)
        return x * 2


# -- NumPy and math on constants -----------------------------------------------------------------------------

@program(lambda: (rand(2, 3, 4), rand(2, 3, 4)))
class np_sqrt_attention_scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.d = 4

    def forward(self, q, k):
        return torch.softmax(q @ k.transpose(1, 2) / np.sqrt(self.d), -1)


@program(X48)
class np_float32_scalar(nn.Module):
    def forward(self, x):
        return x * np.float32(0.5) + float(np.float32(1.5))


@program(lambda: (rand(2, 3, 4), rand(2, 3, 4)))
class math_sqrt_scale(nn.Module):
    def forward(self, q, k):
        return q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.size(-1)))


@program(lambda: (rand(4, 2), rand(4, 2), rand(4, 2)))
class np_gaussian_nll_constants(nn.Module):
    def forward(self, x, mu, log_var):
        return 0.5 * (np.log(2 * np.pi) + log_var + (x - mu) ** 2 / log_var.exp())


@program(lambda: (rand(2, 3, 4, 4),))
class np_prod_flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), int(np.prod(x.shape[1:])))


@program(X48)
class np_arange_constant_tensor(nn.Module):
    def forward(self, x):
        pos = torch.from_numpy(np.arange(8, dtype=np.float32))
        return x + pos


# -- NumPy on tensors ----------------------------------------------------------------------------------------

@program(X48)
class numpy_roundtrip(nn.Module):
    def forward(self, x):
        a = x.detach().cpu().numpy()
        b = np.tanh(a) * 2.0
        return torch.from_numpy(b) + 1


@program(X48)
class numpy_clip_mean(nn.Module):
    def forward(self, x):
        a = x.numpy()
        a = np.clip(a, -0.5, 0.5)
        return torch.from_numpy(np.mean(a, axis=1))


@program(X48)
class numpy_maximum_concat(nn.Module):
    def forward(self, x):
        a = x.numpy()
        b = np.concatenate([np.maximum(a, 0.0), np.abs(a)], axis=1)
        return torch.as_tensor(b)


# -- collections made in forward -----------------------------------------------------------------------------

@program(X48)
class ordered_dict_outputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        out = collections.OrderedDict()
        out["feat"] = self.stem(x)
        out["logits"] = self.head(out["feat"])
        return out


@program(X48)
class defaultdict_groups(nn.Module):
    def forward(self, x):
        groups = collections.defaultdict(list)
        for i, row in enumerate(x.unbind(0)):
            groups[i % 2].append(row)
        return [torch.stack(groups[k]).sum(0) for k in sorted(groups)]


Pair = collections.namedtuple("Pair", ["loc", "scale"])


@program(X48)
class namedtuple_output(nn.Module):
    def forward(self, x):
        return Pair(loc=x.mean(1), scale=x.std(1))


@program(X48)
class counter_of_names(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)])

    def forward(self, x):
        kinds = collections.Counter(type(b).__name__ for b in self.blocks)
        for b in self.blocks:
            x = b(x)
        return x * kinds["Linear"]


# -- itertools over module lists -----------------------------------------------------------------------------

@program(X48)
class itertools_chain_layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.ModuleList([nn.Linear(8, 8), nn.ReLU()])
        self.decoder = nn.ModuleList([nn.Linear(8, 4)])

    def forward(self, x):
        for layer in itertools.chain(self.encoder, self.decoder):
            x = layer(x)
        return x


@program(X48)
class itertools_chain_parameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        total = sum(p.sum() for p in itertools.chain(self.a.parameters(), self.b.parameters()))
        return self.b(self.a(x)), total


@program(X48)
class itertools_pairwise_product(nn.Module):
    def forward(self, x):
        cols = x.split(2, dim=1)
        return torch.stack([a * b for a, b in itertools.combinations(cols, 2)]).sum(0)


# -- dataclass configs, helper objects, super().__init__ chains ----------------------------------------------

@dataclasses.dataclass
class BlockConfig:
    hidden: int = 8
    act: str = "relu"
    residual: bool = True
    scale: float = 0.5


@program(X48)
class dataclass_config_read(nn.Module):
    def __init__(self, cfg=BlockConfig()):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x):
        h = self.fc(x)
        h = F.relu(h) if self.cfg.act == "relu" else F.gelu(h)
        if self.cfg.residual:
            h = h + x
        return h * self.cfg.scale


@program(X48)
class dataclass_made_in_forward(nn.Module):
    def forward(self, x):
        cfg = BlockConfig(scale=2.0)
        cfg2 = dataclasses.replace(cfg, residual=False)
        return x * cfg.scale + (x if cfg2.residual else 0), dataclasses.asdict(cfg2)["hidden"]


class RunningSum:
    def __init__(self):
        self.total = None
        self.count = 0

    def add(self, t):
        self.total = t if self.total is None else self.total + t
        self.count += 1

    def mean(self):
        return self.total / self.count


@program(X48)
class helper_object_in_forward(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        acc = RunningSum()
        for layer in self.layers:
            x = layer(x)
            acc.add(x)
        return acc.mean()


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, t):
        return t * self.factor


@program(X48)
class callable_helper_in_forward(nn.Module):
    def forward(self, x):
        return Scaler(3.0)(x) + Scaler(factor=x.mean())(x)


class BaseHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class MiddleHead(BaseHead):
    def __init__(self, dim):
        super().__init__(dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(super().forward(x))


@program(X48)
class super_init_chain(MiddleHead):
    def __init__(self):
        super().__init__(8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        return self.out(super().forward(x))


class ActivationMixin:
    def activate(self, x):
        return F.silu(x) * self.alpha


@program(X48)
class mixin_method(ActivationMixin, nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = 1.5
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.activate(self.fc(x))


# -- torch.no_grad() / torch.set_grad_enabled ----------------------------------------------------------------

@program(X48G)
class no_grad_target_network(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Linear(8, 4)
        self.target = nn.Linear(8, 4)

    def forward(self, x):
        with torch.no_grad():
            t = self.target(x)
        return self.online(x) - t


@program(X48G)
class set_grad_enabled_false(nn.Module):
    def forward(self, x):
        with torch.set_grad_enabled(False):
            y = x * 2
        return y, y.requires_grad


@program(X48G)
class set_grad_enabled_training_flag(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.eval()

    def forward(self, x):
        with torch.set_grad_enabled(self.training):
            y = self.fc(x)
        return y, y.requires_grad


@program(X48G)
class no_grad_decorated_helper(nn.Module):
    @torch.no_grad()
    def stats(self, x):
        return x.mean(0), x.std(0)

    def forward(self, x):
        mean, std = self.stats(x)
        return (x - mean) / std


@program(X48G)
class inference_detach_branch(nn.Module):
    def forward(self, x):
        with torch.no_grad():
            scale = x.abs().amax(dim=1, keepdim=True)
        return x / scale.clamp(min=1e-6)


# -- .item() (captured as data-dependent scalars) ------------------------------------------------------------

@program(X48, group="scalar")
class item_max_scale(nn.Module):
    def forward(self, x):
        s = x.abs().max().item()
        return x / s


@program(X48, group="scalar")
class float_of_buffer_temperature(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("temperature", torch.tensor(2.0))

    def forward(self, x):
        return torch.softmax(x / float(self.temperature), -1)


@program(X48, group="scalar")
class item_in_full(nn.Module):
    def forward(self, x):
        return x + torch.full((8,), x.sum().item())


@program(X48, group="scalar")
class item_loss_value(nn.Module):
    def forward(self, x):
        loss = x.pow(2).mean()
        return loss, loss.item() * 0 + loss


# -- more of what crawled code does ----------------------------------------------------------------------------

def sinusoid(n):
    return sinusoid.table[:n]


sinusoid.table = torch.sin(torch.arange(16.0) / 4)  # a function attribute used as a cache


@program(X48)
class function_attribute_cache(nn.Module):
    def forward(self, x):
        return x + sinusoid(x.size(1))


@program(X48)
class catch_warnings_block(nn.Module):
    def forward(self, x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = x * 2
        return y


@program(X48)
class typing_get_origin(nn.Module):
    def forward(self, x):
        if typing.get_origin(List[int]) is list:
            x = x + 1
        return x


@program(X48)
class jit_annotate_optional(nn.Module):
    def forward(self, x):
        cache = torch.jit.annotate(Optional[Tensor], None)
        if cache is None:
            cache = x.mean(0)
        return x - cache


@program(X48)
class tensor_legacy_from_list(nn.Module):
    def forward(self, x):
        w = torch.Tensor([0.5, 2.0]).repeat(4)
        return x * w, x.type(torch.LongTensor)


@program(X48)
class variable_of_floattensor_zero(nn.Module):
    def forward(self, x):
        h = Variable(torch.FloatTensor(x.size(0), 3).zero_())
        return torch.cat([x, h], 1)


@program(X48G)
class requires_grad_false_copy(nn.Module):
    def forward(self, x):
        frozen = x.detach().clone().requires_grad_(False)
        return x * frozen, frozen.requires_grad


@program(X48)
class model_ema_no_grad(nn.Module):
    """timm-style ModelEma: ``ema.data.copy_(ema * decay + (1 - decay) * p)`` over named_parameters."""

    def __init__(self):
        super().__init__()
        self.model = nn.Linear(8, 4)
        self.ema = nn.Linear(8, 4)
        self.decay = 0.9

    def forward(self, x):
        with torch.no_grad():
            for (_, p), (_, ep) in zip(self.model.named_parameters(), self.ema.named_parameters()):
                ep.data.copy_(ep.data * self.decay + (1 - self.decay) * p.data)
        return self.ema(x)


@program(X48)
class spectral_norm_train(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.utils.spectral_norm(nn.Linear(8, 4))

    def forward(self, x):
        return self.fc(x)


@program(X48)
class buffer_step_then_cached_tensor(nn.Module):
    """The spectral-norm pattern without the hook: a buffer updated in place, a tensor cached on the
    module (a Python side effect), then operations that cannot raise once traced."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.register_buffer("u", torch.ones(4))

    def forward(self, x):
        self.u.mul_(0.5).add_(1.0)
        self.cached = self.u * 2
        return F.linear(x, self.fc.weight) + self.cached.sum()


@program(X48)
class weight_norm_parametrization(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.utils.parametrizations.weight_norm(nn.Linear(8, 4))

    def forward(self, x):
        return self.fc(x)


@torch.compiler.disable
def log_stats(t):
    return t.detach().abs().mean()


@program(X48)
class compiler_disabled_helper(nn.Module):
    def forward(self, x):
        y = x * 2
        stat = log_stats(y)
        return y + 1, stat


@program(X48)
class numpy_from_sizes(nn.Module):
    def forward(self, x):
        pad = torch.from_numpy(np.zeros((x.shape[0], 2), dtype=np.float32))
        return torch.cat([x, pad], dim=1)


@program(X48)
class islice_layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        for layer in itertools.islice(self.layers, 2):
            x = torch.relu(layer(x))
        return x


@program(lambda: (rand(2, 3, 4, 4),))
class functools_partial_reduce(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = functools.partial(F.leaky_relu, negative_slope=0.1)

    def forward(self, x):
        flat = functools.reduce(operator.mul, x.shape[1:], 1)
        return self.act(x).reshape(x.size(0), flat)


@program(X48)
class batch_counter_buffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("num_batches", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        self.num_batches += 1
        return x * self.num_batches


@program(X48, group="scalar")
class tolist_of_sums(nn.Module):
    def forward(self, x):
        return x * 2, x.sum(1).tolist()


@program(X48, group="dynamic")
class boolean_mask_select(nn.Module):
    def forward(self, x):
        return x[x > 0].sum(), torch.nonzero(x > 1).shape[1]


@program(lambda: (rand(4, 8), torch.tensor([1, 0, 1, 1], dtype=torch.bool)))
class masked_rows_mean(nn.Module):
    """Masked mean without data-dependent shapes (``mask.float()`` weights), as most crawled losses do."""

    def forward(self, x, mask):
        w = mask.float().unsqueeze(1)
        return (x * w).sum(0) / w.sum().clamp(min=1)


@program(X48, group="dynamic")
class nonzero_index_gather(nn.Module):
    def forward(self, x):
        idx = (x[:, 0] > 0).nonzero(as_tuple=True)[0]
        return x.index_select(0, idx) * 2


# -- which programs dynacap does not capture in one graph today ----------------------------------------------
# Printed by `PYTHONPATH=. python3 benchmarks/module_programs.py --known-breaks` from what dynacap does now.

KNOWN_BREAKS: Dict[str, str] = {
    "requires_grad_on_new":
        '`tensor.requires_grad_()` makes a tensor require grad, which a graph cannot do for its backends;'
        ' it runs eagerly between two graphs',
    "warn_flag_on":
        'call to `_warnings.warn`, a function dynacap cannot look inside; it runs eagerly (wrap it with '
        'dynacap.disable, or use a torch operation instead)',
    "compiler_disabled_helper":
        '`test_module_programs.log_stats` is disabled by the user (torch.compiler.disable)',
}


def _run(model, args, seed):
    """``model(*args)`` after seeding torch's RNG; returns the result and the warnings it gave (category, text)."""
    torch.manual_seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = model(*args)
    return result, [(w.category, str(w.message)) for w in caught]


def run_captured(prog: Program, *, fullgraph=True, backend=None):
    """Eager and dynacap runs of ``prog`` (two calls each, fresh module per engine); returns the graph count.

    ``backend``: compiles each graph (a dynacap backend name; default: run the FX graph as is).
    """
    eager_model, args = prog.build()
    model, _ = prog.build()
    backend = CountingBackend(backend)
    compiled = dynacap.optimize(model, backend=backend, fullgraph=fullgraph)
    for call in range(2):
        e_args, c_args = clone_inputs(args), clone_inputs(args)
        expected, e_warned = _run(eager_model, e_args, seed=2 + call)
        actual, c_warned = _run(compiled, c_args, seed=2 + call)
        assert_same(expected, actual, f"call {call} result")
        assert c_warned == e_warned, f"call {call}: warned {c_warned}, eager warned {e_warned}"
        assert_same(e_args, c_args, f"call {call} inputs after the call")
        assert_same(eager_model.state_dict(), model.state_dict(), f"call {call} module state")
    return backend.compiles


def _param(name):
    # raises=: a known break must fail as a break (fullgraph's Unsupported), never as a wrong result.
    marks = [pytest.mark.xfail(strict=True, raises=dynacap.Unsupported, reason=KNOWN_BREAKS[name])] \
        if name in KNOWN_BREAKS else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_param(n) for n in PROGRAMS])
def test_module_program(name):
    prog = PROGRAMS[name]
    with prog.settings():
        assert run_captured(prog) == 1


#: Programs whose graphs mutate state or leave Python (``.data`` writes, buffers, checkpoint, NumPy,
#: data-dependent scalars and sizes), also run under ``aot_eager``, where functionalization applies.
AOT_PREFIXES = ("data_", "model_ema", "batch_counter", "floatfunctional", "checkpoint", "numpy", "np_",
                "item", "float_of", "tolist", "nonzero", "boolean", "no_grad", "set_grad")


@pytest.mark.parametrize("name", [_param(n) for n in PROGRAMS if n.startswith(AOT_PREFIXES)])
def test_module_program_aot_eager(name):
    prog = PROGRAMS[name]
    with prog.settings():
        assert run_captured(prog, backend="aot_eager") == 1


def test_enough_programs():
    assert len(PROGRAMS) >= 80
    assert set(KNOWN_BREAKS) <= set(PROGRAMS)


def test_benchmark_table(capsys):
    """``benchmarks/module_programs.py`` on two programs: one row each, totals, no result different from eager."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "module_programs.py"
    spec = importlib.util.spec_from_file_location("module_programs_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["data_ema_buffer", "normal_log_prob"]) == 0
    out = capsys.readouterr().out
    assert "| data_ema_buffer | default | 1 / 0 | 1 / 0 | yes / yes |" in out
    assert "programs: 2" in out and "results different from eager: none" in out


# -- program order: operations after a Python side effect in a graph that changes an input ------------------

class _Holder:
    pass


def _inputs(*extra):
    """Fresh inputs of the program-order cases, the same each call (run_differential asks once per run)."""
    torch.manual_seed(0)
    return (rand(4, 8), *extra, _Holder()), {}


def _step_cache_gather(x, idx, holder):
    x.add_(1.0)  # changes an input: the graph cannot be rerun if it raises
    holder.cached = x * 2  # a side effect, replayed after the graph
    return x.index_select(0, idx)  # may raise on idx's values: runs after the replay


def _step_cache_linear(x, w, holder):
    x.add_(1.0)
    holder.cached = x * 2
    return F.linear(x, w).relu() + holder.cached.sum()  # raise only on shapes and dtypes, which tracing checked


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_program_order_operations_that_cannot_raise_follow_a_side_effect(backend):
    from differential import run_differential

    make = lambda: _inputs(torch.ones(3, 8))  # noqa: E731
    diff = run_differential(_step_cache_linear, *make()[0], backend=CountingBackend(backend), fresh_inputs=make)
    assert diff.compiles_first == 1


def test_program_order_an_operation_that_may_raise_still_splits():
    from differential import explain_captured, run_differential

    make = lambda: _inputs(torch.tensor([2, 0]))  # noqa: E731
    run_differential(_step_cache_gather, *make()[0], fresh_inputs=make)
    out = explain_captured(_step_cache_gather, *make()[0])
    assert (out.graph_count, out.graph_break_count) == (1, 1), str(out)
    assert "after a Python side effect" in out.break_reasons[0].reason, str(out)
    # When it raises, eager has changed x and set holder.cached: so has the captured run.
    bad = lambda: _inputs(torch.tensor([7]))  # noqa: E731
    run_differential(_step_cache_gather, *bad()[0], fresh_inputs=bad)


# -- Python attributes on tensors -----------------------------------------------------------------------------

def _tag_made_tensor(x):
    y = x * 2
    y.scale = x.sum()  # a tensor attribute holding a tensor of the same graph
    y.tag = "scaled"
    return y + 1, y, y.tag, y.scale * 3


def _tag_input(x):
    x.seen = True
    return x * 2, x.seen


def _shadow_a_method(x):
    y = x * 2
    y.add = 1  # a method's name: eager stores it in the instance dict; dynacap does not model that
    return y, y.add


def test_python_attribute_on_a_tensor_made_in_the_graph_is_set_on_its_output():
    from differential import explain_captured, run_differential

    diff = run_differential(_tag_made_tensor, rand(3))
    assert diff.compiles_first == 1
    _, y, tag, _ = diff.captured[1].result
    assert (tag, y.tag) == ("scaled", "scaled")
    torch.testing.assert_close(y.scale, diff.eager.result[1].scale)
    out = explain_captured(_tag_made_tensor, rand(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_python_attribute_on_an_input_tensor_is_visible_after_the_call(backend):
    x = rand(3)
    counting = CountingBackend(backend)
    out, seen = dynacap.optimize(_tag_input, backend=counting, fullgraph=True)(x)
    assert seen is True and x.seen is True and counting.compiles == 1
    torch.testing.assert_close(out, x * 2)


def test_python_attribute_named_like_a_tensor_method_still_breaks():
    from differential import explain_captured

    out = explain_captured(_shadow_a_method, rand(3))
    assert out.graph_break_count == 1 and "`.add`" in out.break_reasons[0].reason, str(out)


# -- warnings: what eager prints once is printed once -------------------------------------------------------

def _warn_then_scale(x):
    y = x + 1
    warnings.warn("legacy mode is deprecated", UserWarning)  # runs eagerly between two graphs
    return y * 2


def _warned_over_calls(fn, calls=3):
    """The warnings ``fn`` shows over ``calls`` calls under the "default" action (once per location)."""
    with warnings.catch_warnings(record=True) as caught:  # entering it starts every registry afresh
        warnings.simplefilter("default")
        for _ in range(calls):
            fn(rand(3))
    return [(w.category, str(w.message), w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_warning_shown_once_by_eager_is_shown_once_under_capture(backend):
    # AOTAutograd's compile of the graph after the warning sets and undoes warning filters; CPython
    # clears every module's __warningregistry__ on any filter change, so the next call printed it again.
    expected = _warned_over_calls(_warn_then_scale)
    counting = CountingBackend(backend)
    assert _warned_over_calls(dynacap.optimize(_warn_then_scale, backend=counting)) == expected
    assert len(expected) == 1 and counting.compiles == 2


def test_a_warning_filter_the_captured_code_sets_still_resets_the_registries():
    def set_filter_then_warn(x):
        warnings.simplefilter("default")  # a real filter change: eager's registries start afresh
        warnings.warn("after a filter change", UserWarning)
        return x * 2

    def warned(fn):
        with warnings.catch_warnings(record=True) as caught:
            for _ in range(2):
                fn(rand(3))
        return [str(w.message) for w in caught]

    assert warned(dynacap.optimize(set_filter_then_warn, backend="aot_eager")) == warned(set_filter_then_warn) == \
        ["after a filter change"] * 2


def _warns_here(x):
    warnings.warn("helper warns", UserWarning)
    return x + 1


def _warns_at_caller(x):
    warnings.warn("helper is deprecated", DeprecationWarning, stacklevel=2)
    return x + 1


def _calls_warning_helpers(x):
    y = x * 2
    return _warns_here(y) * 3 + _warns_at_caller(y)


def _shown(fn):
    """Each warning ``fn`` shows over two calls, with the location it names."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            fn(rand(3))
    return [(w.category, str(w.message), w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_warning_inside_a_called_function_names_eager_location(backend):
    # The warn ran from the outermost rewritten frame: its location (and once-per-location registry)
    # was the caller's line, and with stacklevel=2 dynacap's own optimize.py.
    expected = _shown(_calls_warning_helpers)
    assert [e[3] for e in expected] == [_warns_here.__code__.co_firstlineno + 1,
                                        _calls_warning_helpers.__code__.co_firstlineno + 2] * 2
    assert _shown(dynacap.optimize(_calls_warning_helpers, backend=CountingBackend(backend))) == expected


def test_captures_ending_out_of_order_leave_the_warning_filters_working():
    """Two threads' captures: the first in ends first.  Each capture used to restore what it found, so the
    second put the capture-time stand-in back for good and a later filter change no longer reset the
    registries (a flaky failure of the test above in full runs)."""
    from dynacap.modes import preserving_warning_registries

    real = warnings._filters_mutated
    first, second = preserving_warning_registries(), preserving_warning_registries()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    second.__exit__(None, None, None)
    assert warnings._filters_mutated is real
