import torch, torch.nn as nn
def window_partition(x, ws):
    B,H,W,C=x.shape; x=x.view(B,H//ws,ws,W//ws,ws,C); return x.permute(0,1,3,2,4,5).contiguous().view(-1,ws,ws,C)
def window_reverse(w, ws, H, W):
    B=int(w.shape[0]/(H*W/ws/ws)); x=w.view(B,H//ws,W//ws,ws,ws,-1); return x.permute(0,1,3,2,4,5).contiguous().view(B,H,W,-1)
class Model(nn.Module):
    def __init__(self, dim=96, heads=3, ws=7, shift=3, res=56):
        super().__init__()
        self.dim,self.heads,self.ws,self.shift,self.res=dim,heads,ws,shift,res
        self.norm=nn.LayerNorm(dim); self.spatial=nn.Conv1d(heads*ws*ws,heads*ws*ws,1); self.mlp=nn.Sequential(nn.Linear(dim,4*dim),nn.GELU(),nn.Linear(4*dim,dim))
    def forward(self,x):
        H=W=self.res; B,L,C=x.shape; sc=x
        x=self.norm(x).view(B,H,W,C)
        x=torch.roll(x,shifts=(-self.shift,-self.shift),dims=(1,2))
        xw=window_partition(x,self.ws).view(-1,self.ws*self.ws,C)
        xw=xw.view(-1,self.ws*self.ws,self.heads,C//self.heads).transpose(1,2).reshape(-1,self.heads*self.ws*self.ws,C//self.heads)
        xw=self.spatial(xw).view(-1,self.heads,self.ws*self.ws,C//self.heads).transpose(1,2).reshape(-1,self.ws*self.ws,C)
        x=window_reverse(xw.view(-1,self.ws,self.ws,C),self.ws,H,W)
        x=torch.roll(x,shifts=(self.shift,self.shift),dims=(1,2)).view(B,H*W,C)
        x=sc+x
        return x+self.mlp(self.norm(x))
def get_inputs(): return [torch.randn(10,56*56,96)]
def get_init_inputs(): return []
