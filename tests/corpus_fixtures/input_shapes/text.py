import torch.nn as nn


class TokenClassifier(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, 3)

    def forward(self, input_ids):
        return self.fc(self.emb(input_ids).mean(1))


class SeqEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(12, 24, batch_first=True)

    def forward(self, seq):
        out, _ = self.rnn(seq)
        return out[:, -1]
