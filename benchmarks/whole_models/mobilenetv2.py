import torch, torch.nn as nn
def block(cin, cout, stride, t):
    h = cin * t
    layers = [] if t == 1 else [nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True)]
    layers += [nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
               nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers)
class Inverted(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__(); self.body = block(cin, cout, stride, t); self.res = stride == 1 and cin == cout
    def forward(self, x): return x + self.body(x) if self.res else self.body(x)
class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers, c = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(inplace=True)], 32
        for t, cout, n, s in cfg:
            for i in range(n):
                layers.append(Inverted(c, cout, s if i == 0 else 1, t)); c = cout
        layers += [nn.Conv2d(c, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(inplace=True), nn.AdaptiveAvgPool2d((1, 1))]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Linear(1280, num_classes))
    def forward(self, x): return self.classifier(self.features(x).view(x.size(0), -1))
def get_inputs(): return [torch.randn(10, 3, 224, 224)]
def get_init_inputs(): return [1000]
