import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers=3, bias=True, batch_first=False):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bias, batch_first, dropout=0, bidirectional=True)
        self.h0 = torch.randn((num_layers * 2, batch_size, hidden_size))
    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        output, h_n = self.gru(x, self.h0)
        return output
batch_size, seq_len, input_size, hidden_size, num_layers = 10, 512, 128, 256, 6
def get_inputs(): return [torch.randn(seq_len, batch_size, input_size)]
def get_init_inputs(): return [input_size, hidden_size, num_layers]
