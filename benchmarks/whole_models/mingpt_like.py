import torch, torch.nn as nn, torch.nn.functional as F, math
class NewGELU(nn.Module):
    def forward(self,x): return 0.5*x*(1.0+torch.tanh(math.sqrt(2.0/math.pi)*(x+0.044715*torch.pow(x,3.0))))
class Model(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        self.c_attn=nn.Linear(n_embd,3*n_embd); self.c_proj=nn.Linear(n_embd,n_embd)
        self.attn_dropout=nn.Dropout(attn_pdrop); self.resid_dropout=nn.Dropout(resid_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen,max_seqlen)).view(1,1,max_seqlen,max_seqlen))
        self.n_head=n_head; self.n_embd=n_embd; self.act=NewGELU(); self.fc=nn.Linear(n_embd,4*n_embd); self.proj=nn.Linear(4*n_embd,n_embd)
        self.ln1=nn.LayerNorm(n_embd); self.ln2=nn.LayerNorm(n_embd)
    def forward(self,x):
        B,T,C=x.size(); h=self.ln1(x)
        q,k,v=self.c_attn(h).split(self.n_embd,dim=2)
        k=k.view(B,T,self.n_head,C//self.n_head).transpose(1,2); q=q.view(B,T,self.n_head,C//self.n_head).transpose(1,2); v=v.view(B,T,self.n_head,C//self.n_head).transpose(1,2)
        att=(q@k.transpose(-2,-1))*(1.0/math.sqrt(k.size(-1)))
        att=att.masked_fill(self.bias[:,:,:T,:T]==0,float('-inf'))
        att=F.softmax(att,dim=-1); att=self.attn_dropout(att)
        y=(att@v).transpose(1,2).contiguous().view(B,T,C)
        x=x+self.resid_dropout(self.c_proj(y))
        return x+self.proj(self.act(self.fc(self.ln2(x))))
def get_inputs(): return [torch.randn(128,512,768)]
def get_init_inputs(): return [768,8,0.0,0.0,512]
