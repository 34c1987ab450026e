import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super().__init__()
        self.h0 = torch.randn((num_layers * 2, batch_size, hidden_size))
        self.c0 = torch.randn((num_layers * 2, batch_size, hidden_size))
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(hidden_size * 2, output_size)
    def forward(self, x):
        self.h0 = self.h0.to(x.device); self.c0 = self.c0.to(x.device)
        out, state = self.lstm(x, (self.h0, self.c0))
        return state[1]
batch_size, sequence_length, input_size, hidden_size, num_layers, output_size = 10, 512, 128, 256, 6, 10
def get_inputs(): return [torch.randn(batch_size, sequence_length, input_size)]
def get_init_inputs(): return [input_size, hidden_size, num_layers, output_size]
