// ifstream_reader.cpp - linear-regression SGD over an ADSD dataset read the
// way C++ programs read binary files: std::ifstream::read of one record at a
// time in a loop.
//
//   ifstream_reader --data PATH --epochs E --batch B --checkpoint PATH
//                   [--checkpoint-every STEPS=4] [--lr LR=0.05] [--sleep-us US=0]
//
// Every epoch: std::filesystem::file_size(PATH), a fresh std::ifstream, read()
// of the 16-byte header ("ADSD", u32le dim, u64le count) checked against the
// size, then read() of one record (u64le id, float x[dim], float y) after
// another until the stream fails at end of file; every B records make one
// SGD step.  libstdc++'s filebuf fills its own buffer (8 KiB) with read(2),
// so it holds records the program has not consumed yet.
//
// Prints "epoch E record ID" per record once its step is done and
// "epoch E loss L" per epoch.  Checkpoint (text: epoch in progress, step,
// batches done in the epoch, weights), written through std::ofstream to
// PATH.tmp and std::rename'd onto PATH every STEPS steps and after each
// epoch, "checkpoint step S" printed just before the rename.  On start a
// checkpoint at PATH is loaded ("resumed at step S epoch E") and training
// continues with its epoch, read from the file as any epoch is; otherwise
// "starting fresh".
// Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string data, checkpoint;
    long epochs = -1, batch = 0, every = 4, sleep_us = 0;
    double lr = 0.05;
};

struct State {
    uint64_t epoch = 0, step = 0, epoch_batches = 0;
    std::vector<double> weights;
};

struct Example {
    uint64_t id;
    std::vector<double> x;
    double y;
};

[[noreturn]] void die(int status, const std::string &message)
{
    std::cerr << "ifstream_reader: " << message << std::endl;
    std::exit(status);
}

long parse_long(const std::string &flag, const std::string &text, long min)
{
    char *end = nullptr;
    long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < min)
        die(2, flag + " expects an integer >= " + std::to_string(min) + ", got '" + text + "'");
    return value;
}

Options parse_options(int argc, char **argv)
{
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--data") o.data = value;
        else if (flag == "--checkpoint") o.checkpoint = value;
        else if (flag == "--epochs") o.epochs = parse_long(flag, value, 0);
        else if (flag == "--batch") o.batch = parse_long(flag, value, 1);
        else if (flag == "--checkpoint-every") o.every = parse_long(flag, value, 1);
        else if (flag == "--sleep-us") o.sleep_us = parse_long(flag, value, 0);
        else if (flag == "--lr") o.lr = std::strtod(value.c_str(), nullptr);
        else die(2, "unknown option: " + flag);
    }
    if (o.data.empty() || o.checkpoint.empty() || o.epochs < 0 || o.batch < 1 || !(o.lr > 0))
        die(2, "usage: ifstream_reader --data PATH --epochs E --batch B --checkpoint PATH "
               "[--checkpoint-every STEPS] [--lr LR] [--sleep-us US]");
    return o;
}

uint64_t get_le(const unsigned char *bytes, int size)
{
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; i--)
        value = value << 8 | bytes[i];
    return value;
}

float get_f32(const unsigned char *bytes)
{
    uint32_t bits = static_cast<uint32_t>(get_le(bytes, 4));
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

bool load_checkpoint(const std::string &path, State &state)
{
    std::ifstream in(path);
    if (!in)
        return false;
    std::string magic;
    size_t dim = 0;
    in >> magic >> state.epoch >> state.step >> state.epoch_batches >> dim;
    if (magic != "ifstream_reader-v1" || !in)
        die(3, path + ": not a checkpoint of this trainer");
    state.weights.assign(dim, 0.0);
    for (double &w : state.weights)
        in >> w;
    if (!in)
        die(3, path + ": truncated checkpoint");
    return true;
}

void save_checkpoint(const std::string &path, const State &state)
{
    const std::string temp = path + ".tmp";
    {
        std::ofstream out(temp, std::ios::trunc);
        out.precision(17);
        out << "ifstream_reader-v1 " << state.epoch << ' ' << state.step << ' '
            << state.epoch_batches << ' ' << state.weights.size() << '\n';
        for (double w : state.weights)
            out << w << '\n';
        out.close();
        if (!out)
            die(1, "writing " + temp);
    }
    std::cout << "checkpoint step " << state.step << std::endl;
    if (std::rename(temp.c_str(), path.c_str()) != 0)
        die(1, "renaming " + temp + ": " + std::strerror(errno));
}

// One SGD step on the mean squared error; returns the batch's summed loss.
double train_step(State &state, const std::vector<Example> &batch, double lr)
{
    std::vector<double> gradient(state.weights.size(), 0.0);
    double loss = 0;
    for (const Example &example : batch) {
        double error = -example.y;
        for (size_t j = 0; j < example.x.size(); j++)
            error += state.weights[j] * example.x[j];
        loss += error * error;
        for (size_t j = 0; j < example.x.size(); j++)
            gradient[j] += 2 * error * example.x[j] / static_cast<double>(batch.size());
    }
    for (size_t j = 0; j < gradient.size(); j++)
        state.weights[j] -= lr * gradient[j];
    return loss;
}

void finish_step(State &state, std::vector<Example> &batch, const Options &o)
{
    if (o.sleep_us > 0)
        usleep(static_cast<useconds_t>(o.sleep_us));
    for (const Example &example : batch)
        std::cout << "epoch " << state.epoch << " record " << example.id << '\n';
    std::cout.flush();
    batch.clear();
    state.step++;
    state.epoch_batches++;
}

// Reads one epoch; returns its mean loss.
double run_epoch(State &state, const Options &o)
{
    const auto file_size = std::filesystem::file_size(o.data);
    std::ifstream in(o.data, std::ios::binary);
    if (!in)
        die(1, "cannot open " + o.data);
    unsigned char header[16];
    if (!in.read(reinterpret_cast<char *>(header), sizeof header) ||
        std::memcmp(header, "ADSD", 4) != 0)
        die(3, o.data + ": not an ADSD dataset");
    const size_t dim = get_le(header + 4, 4);
    const uint64_t count = get_le(header + 8, 8);
    const size_t record_size = 8 + 4 * dim + 4;
    if (file_size != sizeof header + count * record_size)
        die(3, o.data + ": size does not match the header's record count");
    if (state.weights.empty())
        state.weights.assign(dim, 0.0);
    if (state.weights.size() != dim)
        die(3, o.data + ": dimension differs from the checkpoint's");

    std::vector<unsigned char> record(record_size);
    std::vector<Example> batch;
    double loss = 0;
    uint64_t seen = 0;
    while (in.read(reinterpret_cast<char *>(record.data()), static_cast<long>(record_size))) {
        Example example{get_le(record.data(), 8), std::vector<double>(dim), 0};
        for (size_t j = 0; j < dim; j++)
            example.x[j] = get_f32(record.data() + 8 + 4 * j);
        example.y = get_f32(record.data() + 8 + 4 * dim);
        batch.push_back(std::move(example));
        seen++;
        if (batch.size() == static_cast<size_t>(o.batch)) {
            loss += train_step(state, batch, o.lr);
            finish_step(state, batch, o);
            if (state.step % static_cast<uint64_t>(o.every) == 0)
                save_checkpoint(o.checkpoint, state);
        }
    }
    if (in.gcount() != 0)
        die(3, o.data + ": a partial record at the end");
    if (!batch.empty()) {
        loss += train_step(state, batch, o.lr);
        finish_step(state, batch, o);
    }
    return seen ? loss / static_cast<double>(seen) : 0.0;
}

}  // namespace

int main(int argc, char **argv)
{
    const Options o = parse_options(argc, argv);
    State state;
    if (load_checkpoint(o.checkpoint, state))
        std::cout << "resumed at step " << state.step << " epoch " << state.epoch << std::endl;
    else
        std::cout << "starting fresh" << std::endl;
    std::cout.setf(std::ios::fixed);
    std::cout.precision(6);
    while (state.epoch < static_cast<uint64_t>(o.epochs)) {
        double loss = run_epoch(state, o);
        std::cout << "epoch " << state.epoch << " loss " << loss << std::endl;
        state.epoch++;
        state.epoch_batches = 0;
        save_checkpoint(o.checkpoint, state);
    }
    std::cout << "done at step " << state.step << std::endl;
    return 0;
}
