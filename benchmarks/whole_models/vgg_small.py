import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        cfg = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M']
        layers, c = [], 3
        for v in cfg:
            if v == 'M': layers.append(nn.MaxPool2d(2, 2))
            else: layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]; c = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(0.0), nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.0), nn.Linear(4096, num_classes))
    def forward(self, x):
        x = self.features(x)
        return self.classifier(torch.flatten(x, 1))
def get_inputs(): return [torch.randn(10, 3, 224, 224)]
def get_init_inputs(): return [1000]
