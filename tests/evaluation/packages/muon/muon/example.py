"""An example of using Muon, as an author without tests of their own could name it (papers.yaml `example_script`):
a few steps of training a small network on fixed data, the hidden matrices with Muon and the rest with AdamW, then
one orthogonalization of a tall matrix. It asserts nothing: the platform records the calls it makes of the annotated
code and proposes replay tests from them."""

import torch

import muon

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 24), torch.nn.ReLU(),
                          torch.nn.Linear(24, 3))
hidden = [p for p in net.parameters() if p.ndim == 2]
other = [p for p in net.parameters() if p.ndim != 2]
optimizer = muon.SingleDeviceMuonWithAuxAdam([
    dict(params=hidden, use_muon=True, lr=0.02, weight_decay=0.01),
    dict(params=other, use_muon=False, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01),
])
inputs, targets = torch.randn(16, 12), torch.arange(16) % 3
for step in range(3):
    net.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(inputs), targets)
    loss.backward()
    optimizer.step()
    print(f"step {step + 1}: loss {loss.item():.4f}")

tall = muon.zeropower_via_newtonschulz5(torch.randn(20, 6), steps=5)
print("orthogonalized a 20x6 matrix:", tall.dtype, tuple(tall.shape))
