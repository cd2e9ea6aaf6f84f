"""Tiny HuggingFace `transformers` models built from configs in code (no downloads): name -> (model, kwargs).

One per family the semantics issue asks for: an encoder (BERT), decoders (GPT-2, Llama), a seq2seq
model (T5), a vision model (ViT) and audio models (Wav2Vec2, Whisper).
"""
import torch


def build(name):
    import transformers as T
    torch.manual_seed(0)
    if name == "bert":
        cfg = T.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=37, max_position_embeddings=64)
        return T.BertForMaskedLM(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "gpt2":
        cfg = T.GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64)
        return T.GPT2LMHeadModel(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "llama":
        cfg = T.LlamaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1, intermediate_size=37, max_position_embeddings=64)
        return T.LlamaForCausalLM(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "t5":
        cfg = T.T5Config(vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=2,
                         decoder_start_token_id=0)
        return T.T5ForConditionalGeneration(cfg), {"input_ids": torch.randint(0, 99, (2, 8)),
                                                   "decoder_input_ids": torch.randint(0, 99, (2, 5))}
    if name == "vit":
        cfg = T.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=37, num_labels=5)
        return T.ViTForImageClassification(cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}
    if name == "wav2vec2":
        cfg = T.Wav2Vec2Config(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=37, conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
                               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2)
        return T.Wav2Vec2ForCTC(cfg), {"input_values": torch.randn(2, 400)}
    if name == "whisper":
        cfg = T.WhisperConfig(vocab_size=99, d_model=32, encoder_layers=1, decoder_layers=1,
                              encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
                              decoder_ffn_dim=37, num_mel_bins=8, max_source_positions=16,
                              max_target_positions=16, pad_token_id=0, decoder_start_token_id=0)
        return T.WhisperForConditionalGeneration(cfg), {"input_features": torch.randn(2, 8, 32),
                                                        "decoder_input_ids": torch.randint(1, 99, (2, 4))}
    raise KeyError(name)
