import torch, torch.nn as nn
class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1); self.e1 = nn.Conv2d(squeeze, e1, 1); self.e3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.act = nn.ReLU(inplace=True)
    def forward(self, x):
        x = self.act(self.squeeze(x))
        return torch.cat([self.act(self.e1(x)), self.act(self.e3(x))], 1)
class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 96, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
            nn.MaxPool2d(3, 2, ceil_mode=True), Fire(512, 64, 256, 256))
        self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Conv2d(512, num_classes, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))
    def forward(self, x): return torch.flatten(self.classifier(self.features(x)), 1)
def get_inputs(): return [torch.randn(1, 3, 224, 224)]
def get_init_inputs(): return [1000]
