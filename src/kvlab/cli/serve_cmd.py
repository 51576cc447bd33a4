"""``kvlab serve``: the reference engine behind llama.cpp's, OpenAI's and Anthropic's
HTTP APIs."""

from __future__ import annotations

import typer

from kvlab.cli._app import SERVERS, app, console
from kvlab.cli.extras import require_engine


@app.command(rich_help_panel=SERVERS)
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8080, help="TCP port; 0 picks a free one (the URL is printed)."),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="KVLAB_API_KEY", show_default=False,
        help="Require this key (Authorization: Bearer or X-Api-Key) on all but /health."),
    preset: str = typer.Option("toy", help="Toy preset served (its name is the model id)."),
    model: str | None = typer.Option(
        None, "--model", "-m", show_default=False,
        help="Serve a real model instead of the toy: gemma-3-270m (the bundled GGUF) or a "
             "Gemma 3 GGUF path. Loading takes ~20 s; /health answers 503 until then."),
    dtype: str = typer.Option(
        "float32", help="--model weight format: float32 (exact), bfloat16 (half the bytes "
                        "a decode step reads), int8 (a quarter) or w8a8 (int8 with 8-bit "
                        "activations: flatter in batch size, less faithful); the KV cache "
                        "follows the activations (kvlab engine-batch compares them)."),
    ctx_size: int | None = typer.Option(
        None, "--ctx-size", "-c", show_default=False,
        help="Context capacity in tokens (default: the model's max_len; at most that)."),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Decode by full recomputation (no KV cache)."),
    slots: int = typer.Option(
        1, "--slots", "-np",
        help="Sequences served at once. 1: one slot, requests wait their turn. More: "
             "continuous batching over a paged KV cache (all running sequences decode "
             "in one forward; see --kv-blocks)."),
    kv_blocks: int | None = typer.Option(
        None, "--kv-blocks", show_default=False,
        help="Paged KV pool size in blocks per layer (turns batching on). Default with "
             "--slots N: N contexts' worth, ceil(ctx-size / block-size) x N."),
    block_size: int = typer.Option(16, "--block-size", help="Tokens per KV block."),
    prefill_budget: int = typer.Option(
        256, "--prefill-budget",
        help="Most prompt tokens computed per scheduler step (chunked prefill)."),
    no_prefix_cache: bool = typer.Option(
        False, "--no-prefix-cache",
        help="With --slots: never reuse cached KV blocks of earlier prompts (on by "
             "default; a request that sends cache_prompt: false never reuses them)."),
    seed: int = typer.Option(42, help="Sampling seed of requests that send none (-1: random)."),
    threads: int = typer.Option(2, "--threads", "-t", help="torch CPU threads."),
    synthetic: bool = typer.Option(
        False, "--synthetic",
        help="Serve scheduled synthetic tokens instead (kvlab serve-synthetic has options)."),
) -> None:
    """Serve the reference engine: /completion, /v1/chat/completions, /v1/completions,
    /v1/responses, /v1/messages, /v1/embeddings...

    One slot serializes requests; --slots N (or --kv-blocks M) batches up to N
    sequences continuously over a paged KV pool (decode rows and prompt chunks in one
    forward), preempts the youngest when the pool runs out, and reuses the KV blocks of
    prompts it has seen (prefix caching). GET /metrics shows running and waiting
    requests, KV blocks and token counters (vLLM's names). The model loads after the
    listener starts; /health answers 503 until it is ready. A model that fails to load
    stops the server with one line naming the file.
    """
    from kvlab.serve.runner import check_port

    check_port(port)
    if synthetic:
        from kvlab.cli.calibrate_cmd import run_synthetic

        run_synthetic(host, port)
        return
    require_engine("kvlab serve")
    from kvlab.serve import ServeSettings, create_app
    from kvlab.serve import serve as run

    settings = ServeSettings(preset=preset, n_ctx=ctx_size, use_cache=not no_cache,
                             seed=seed, threads=threads, api_key=api_key, model=model,
                             dtype=dtype, slots=slots, kv_blocks=kv_blocks,
                             block_size=block_size, prefill_budget=prefill_budget,
                             prefix_cache=not no_prefix_cache)
    application = create_app(settings)  # ConfigError (exit 2) before binding anything

    def announce(url: str) -> None:
        console.print(f"kvlab serve: listening on {url}", markup=False, highlight=False,
                      soft_wrap=True)

    run(application, host, port, announce)
